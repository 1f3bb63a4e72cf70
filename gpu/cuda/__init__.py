"""The CUDA backend's device layer: module loader, device memory, NTT and the H polynomial.

Nothing here touches the driver at import time. A worker creates its one context after it has
started (CUDA does not survive ``fork``) with :func:`gpu.cuda.loader.init_context`, then::

    from gpu.cuda import loader, ntt
    loader.init_context(0)
    eng = ntt.NttEngine()                      # twiddles per size, kept on the device
    h = eng.compute_h(a, b, c)                 # host Fr vectors in, H coefficients out

See docs/gpu.md.
"""
