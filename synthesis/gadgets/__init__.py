"""Retired (issue 36): the one gadget library is ``synthesis.bellpepper``. Only ``core`` is left,
an alias for ``synthesis/filecoin/post.py`` (another branch's file at the time); delete the
package once post.py imports ``..bellpepper.core``."""
