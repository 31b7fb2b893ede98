#pragma once
// Where each lane's data sits for the tensor-core products of attention_tc.cu (PTX's
// mma.m16n8k16 with bfloat16 operands and ldmatrix.m8n8.x4), written once and tested on the CPU
// (tests/cuda_host_test.cc emulates both instructions from these maps and checks the products).
//
// ldmatrix .x4: lane l gives the address of row l % 8 of 8x8 matrix l / 8 (8 contiguous bf16);
// register i of lane l then holds matrix i's row l / 4, elements 2 (l % 4) and + 1 (with .trans:
// rows 2 (l % 4) and + 1 of column l / 4). mma.m16n8k16, lane l = 4 g + t: A (16 x 16) register i
// holds row g + 8 (i % 2), columns 2t + 8 (i / 2) and + 1; B (16 x 8) register i holds rows
// 2t + 8 i and + 1 of column g; the float32 accumulator's element r is row g + 8 (r / 2), column
// 2t + r % 2.
#include "ops/cuda/hd.h"

namespace tg::cuda_ops::mma {

struct Cell {
  int row, col;
};

// The row and column (within the 16 x 16 tile at the warp's corner) lane l points ldmatrix at:
// for an A fragment of a row-major tile (q rows x dims) — registers 0..3 as mma's A;
TG_HD Cell a_fragment_address(int lane) { return {(lane & 7) + ((lane >> 3) & 1) * 8, (lane >> 4) * 8}; }
// for two B fragments from a tile stored with the n index as rows (k: keys x dims, for q kᵀ) —
// registers 0, 1 the B of rows (keys) 0..7, registers 2, 3 that of keys 8..15;
TG_HD Cell bt_fragment_address(int lane) { return {(lane & 7) + (lane >> 4) * 8, ((lane >> 3) & 1) * 8}; }
// for two B fragments from a tile stored with the k index as rows (v: keys x columns, read with
// .trans, for P v) — registers 0, 1 the B of columns 0..7, registers 2, 3 that of columns 8..15.
TG_HD Cell b_trans_fragment_address(int lane) { return {(lane & 7) + ((lane >> 3) & 1) * 8, (lane >> 4) * 8}; }

// The accumulator's element r (0..3) of lane l: its row and column in the 16 x 8 tile.
TG_HD Cell accumulator_cell(int lane, int r) { return {lane / 4 + (r / 2) * 8, 2 * (lane % 4) + (r % 2)}; }

// The A fragment register i (0..3) of P (keys 16 kk .. 16 kk + 15) is made of the accumulator
// tile (n-tile, i.e. keys 8 tile .. + 7) and element pair this returns: tile 2 kk + i / 2, elements
// 2 (i % 2) and + 1 (rows g and g + 8 alternate; the two 8-key halves follow).
TG_HD Cell p_fragment_source(int kk, int i) { return {2 * kk + i / 2, 2 * (i % 2)}; }

}  // namespace tg::cuda_ops::mma
