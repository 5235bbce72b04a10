// A layering probe (CMakeLists.txt here): compiled as part of one layer, with that layer's include view, it
// includes GDX_PROBE_HEADER, a header of a layer it may use (must build) or of a layer above or beside it (must
// fail: the header is not in the view).
#include GDX_PROBE_HEADER

int gdx_layering_probe() { return 0; }
