"""Where the package finds libvidfeat.so: set when the build configures the package or when it
is installed (a path relative to this directory, so that a moved installation still finds its
library); None in the source tree (then $VIDFEAT_LIBRARY, or the system's library path)."""
LIBRARY = None
