#pragma once
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/shape_ops.h"
