"""synthesis.limits' fast paths for C1 documents made of integer arrays (Filecoin's [u8; 32]
domains) keep every bound: the digit bound from text and from a dict, with the field's path."""
import pytest

from synthesis import limits


def test_long_integers_in_text_are_still_refused_with_their_path():
    with pytest.raises(limits.InputError, match=r"^field a\[2\]: an integer of 41 digits, over the limit of 40"):
        limits.loads('{"a": [1, 2, ' + "7" * 41 + "]}")
    with pytest.raises(limits.InputError, match=r"^field b: an integer of 5000 digits"):
        limits.loads('{"s": "' + "1" * 60 + '", "b": ' + "9" * 5000 + "}")
    # a digit run in a string alone only takes the slow path, and passes
    assert limits.loads('{"s": "' + "1" * 60 + '", "b": [1, 2]}') == {"s": "1" * 60, "b": [1, 2]}


def test_integer_arrays_checked_in_one_pass_keep_the_bounds():
    ok = {"d": [[7] * 32 for _ in range(100)]}
    limits.check(ok)
    with pytest.raises(limits.InputError, match=r"^field d\[1\]\[3\]: an integer of 101 digits"):
        limits.check({"d": [[1] * 32, [1, 2, 3, 10 ** 100]]})
    with pytest.raises(limits.InputError, match=r"^field d\[2\]: an integer of 41 digits"):
        limits.check({"d": [-5, 3, -(10 ** 40)]})
    with pytest.raises(limits.InputError, match=r"^field d\[1\]: the number inf is not finite"):
        limits.check({"d": [1, float("inf")]})
    with pytest.raises(limits.InputError, match=r"over 100 bytes"):
        limits.check({"d": [1] * 50}, limits.Limits(document_bytes=100))
    assert limits.loads("[true, 1, 2]") == [True, 1, 2]
