#pragma once
// Moved to pipelines/translator.h in 0.2 (the pipelines sit above models/; text/ holds what is below
// them); this forwarding header goes in 0.3.
#include "../pipelines/translator.h"  // IWYU pragma: export
