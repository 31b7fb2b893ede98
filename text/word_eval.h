#pragma once
// Moved to pipelines/word_eval.h in 0.2 (the pipelines sit above models/; text/ holds what is below
// them); this forwarding header goes in 0.3.
#include "../pipelines/word_eval.h"  // IWYU pragma: export
