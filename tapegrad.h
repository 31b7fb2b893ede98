#pragma once
// tapegrad: one header for users.
#include "autodiff/engine.h"
#include "autodiff/function.h"
#include "autodiff/gradcheck.h"
#include "graph/factory.h"
#include "graph/format.h"
#include "graph/node.h"
#include "graph/random.h"
#include "graph/tensor.h"
#include "ops/kernels/parallel.h"
#include "ops/ops.h"
