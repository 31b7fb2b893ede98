#pragma once
// The include path users write, <tapegrad/tapegrad.h>, in the source tree (the umbrella header).
#include "../tapegrad.h"  // IWYU pragma: export
