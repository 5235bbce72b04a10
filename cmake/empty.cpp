// libgdx.so is gdx_internal linked whole; CMake wants at least one source of its own.
