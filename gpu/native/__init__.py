"""Host builds of the curve code (curve_host.cpp, setup_host.cpp) for CPU tests and setup."""
