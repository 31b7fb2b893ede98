#pragma once
#include "attention.h"
#include "elementwise.h"
#include "matmul.h"
#include "nn.h"
#include "reduce.h"
#include "shape_ops.h"
#include "cpu_capability.h"
