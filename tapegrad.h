#pragma once
// tapegrad: one header for users. The layers, each depending only on those above it:
//   graph/     tensors, dtypes, shapes, the recorded graph, random numbers
//   ops/       every differentiable op (elementwise, reductions, shapes, matmul, nn, attention)
//   autodiff/  backward, tg::grad, hooks, gradcheck, custom ops
//   io/        tg::Status / tg::Result, files, state dicts, safetensors
//   models/    Module, layers, attention, transformers, generation, word2vec
//   optim/     SGD, Adam, AdamW, clipping, learning-rate schedules
//   distributed/ processes over MPI (mpirun, srun): data-parallel training, gradient buckets
//   text/      vocabulary, tokenizers, corpus readers, batching, BLEU, perplexity (no models)
//   pipelines/ models and tokenizers together: Translator, SentenceEncoder, word-vector evaluation
//   train/     the training loop, its resumable state, metrics, progress, reports, program flags
#include "autodiff/engine.h"
#include "autodiff/function.h"
#include "autodiff/gradcheck.h"
#include "distributed/dist.h"
#include "distributed/grad_sync.h"
#include "distributed/word2vec_sync.h"
#include "graph/build_info.h"
#include "graph/cuda.h"
#include "graph/device.h"
#include "graph/factory.h"
#include "graph/format.h"
#include "graph/node.h"
#include "graph/random.h"
#include "graph/tensor.h"
#include "io/checksum.h"
#include "io/file.h"
#include "io/safetensors.h"
#include "io/state_dict.h"
#include "io/status.h"
#include "models/attention.h"
#include "models/bert.h"
#include "models/causal_lm.h"
#include "models/generate.h"
#include "models/layers.h"
#include "models/llama.h"
#include "models/module.h"
#include "models/module_io.h"
#include "models/gpt2.h"
#include "models/transformer.h"
#include "models/word2vec.h"
#include "ops/ops.h"
#include "ops/threads.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "text/batching.h"
#include "text/metrics.h"
#include "text/readers.h"
#include "text/split.h"
#include "text/tokenizer.h"
#include "text/vocabulary.h"
#include "pipelines/sentence_encoder.h"
#include "pipelines/translator.h"
#include "pipelines/word_eval.h"
#include "train/checkpoint.h"
#include "train/cli.h"
#include "train/curves.h"
#include "train/metrics.h"
#include "train/progress.h"
#include "train/report.h"
#include "train/interrupt.h"
#include "train/trainer.h"
