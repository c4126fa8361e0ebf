# http.mk - the HTTP benchmark against a PyTorch peer service (make bench-http), included by the
# top-level Makefile.
