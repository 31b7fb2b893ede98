#pragma once
// Moved to pipelines/sentence_encoder.h in 0.2 (the pipelines sit above models/; text/ holds what is below
// them); this forwarding header goes in 0.3.
#include "../pipelines/sentence_encoder.h"  // IWYU pragma: export
