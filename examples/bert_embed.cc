// bert_embed: sentence embeddings from a pretrained BERT-family model folder (all-MiniLM-L6-v2,
// fetched by `./tg.sh models`), one vector per input line, written as a safetensors file with one
// float32 tensor `embeddings` [lines, hidden] (row i is line i; an empty line is embedded too).
//
//   ./build/bert_embed --model data/models/all-MiniLM-L6-v2 --input sentences.txt --output emb.safetensors
//
// Pooling, normalisation and the longest input come from the folder (1_Pooling/config.json,
// modules.json, sentence_bert_config.json); the flags override them. --layer N pools the hidden
// states after layer N instead (0: the embeddings), for looking at how meaning forms layer by layer.
// Batches are sorted by length and padded only to their longest sentence.
#include <cstdio>
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <tapegrad/tapegrad.h>

namespace {

struct Options {
  std::string model, input, output, pooling, precision = "fp32", device = "auto";
  bool normalize = false, overwrite = false;
  int64_t layer = -1, batch = 32, max_length = 0, threads = 0;
};

int run(int argc, char** argv) {
  Options o;
  tg::cli::Flags f("bert_embed", "sentence embeddings from a pretrained BERT-family model, one per input line");
  f.add("model", &o.model, "model folder (config.json, model.safetensors, tokenizer.json, ...)").not_empty();
  f.add("input", &o.input, "text file, one sentence a line (.gz accepted)").not_empty();
  f.add("output", &o.output, "safetensors file to write: float32 'embeddings' [lines, hidden]").not_empty();
  f.add("pooling", &o.pooling, "mean or cls (default: the folder's 1_Pooling/config.json, else mean)").choices({"", "mean", "cls"});
  f.add("normalize", &o.normalize, "unit-length vectors (default: when the folder's modules.json has Normalize)");
  f.add("layer", &o.layer, "pool the hidden states after this layer (0: embeddings; -1: the last)").min(-1);
  f.add("batch", &o.batch, "sentences per batch").range(1, 4096);
  f.add("max_length", &o.max_length, "longest input in tokens, specials included (0: the folder's max_seq_length)").min(0);
  f.check([&o] { return o.max_length == 0 || o.max_length >= 2 ? std::string() : std::string("--max_length: 0 (the folder's) or at least 2 ([CLS] and [SEP])"); });
  f.add("threads", &o.threads, "threads (0: TG_NUM_THREADS or all cores)").range(0, 1024);
  f.add("overwrite", &o.overwrite, "replace an existing --output");
  tg::cli::add_precision(f, &o.precision);
  tg::cli::add_device(f, &o.device);
  f.parse(argc, argv).or_throw();
  const tg::Device device = tg::cli::device(o.device);
  if (o.threads > 0) tg::set_num_threads(static_cast<int>(o.threads));
  namespace fs = std::filesystem;
  if (fs::is_directory(o.output)) tg::cli::fail(fmt::format("--output {} is a folder; give a file name", o.output));
  if (fs::exists(o.output) && !o.overwrite)
    tg::cli::fail(fmt::format("{} exists; pass --overwrite to replace it, or another --output", o.output));

  tg::AutocastGuard autocast(tg::cli::precision(o.precision));
  auto enc = tg::text::SentenceEncoder::load(o.model).value();
  if (tg::autocast_enabled()) tg::check_representable(enc->model(), tg::kBFloat16, o.model).or_throw();
  enc->model().to(device);
  const tg::BertConfig& cfg = enc->model().cfg;
  if (o.layer > cfg.layers) tg::cli::fail(fmt::format("--layer {}: the model has {} layers (0..{})", o.layer, cfg.layers, cfg.layers));
  if (o.max_length > cfg.max_positions)
    tg::cli::fail(fmt::format("--max_length {}: the model's positions end at {}", o.max_length, cfg.max_positions));
  if (!o.pooling.empty()) enc->pooling = o.pooling == "cls" ? tg::Pooling::kCls : tg::Pooling::kMean;
  if (f.given("normalize")) enc->normalize = o.normalize;
  if (o.max_length > 0) enc->max_length = o.max_length;
  enc->layer = o.layer;

  const std::vector<std::string> lines =
      tg::text::read_lines(o.input, {.trim = false, .skip_empty = false}).value();
  std::fprintf(stderr, "bert_embed: on %s, %zu lines, %lld layers x %lld wide, %s pooling%s, at most %lld tokens, %d threads, %s\n",
               tg::cli::describe_device(device).c_str(), lines.size(), static_cast<long long>(o.layer < 0 ? cfg.layers : o.layer), static_cast<long long>(cfg.hidden),
               enc->pooling == tg::Pooling::kCls ? "CLS" : "mean", enc->normalize ? ", normalized" : "",
               static_cast<long long>(enc->max_length), tg::num_threads(), o.precision.c_str());
  tg::train::Progress progress(static_cast<int64_t>(lines.size()), "embed", "sentences");
  tg::Tensor e = enc->encode(lines, o.batch, [&](int64_t done) { progress.update(done, "", done); });
  progress.finish();
  tg::StateDict out;
  out.insert("embeddings", e);
  tg::save_safetensors(o.output, out,
                       {{"model", o.model}, {"pooling", enc->pooling == tg::Pooling::kCls ? "cls" : "mean"},
                        {"normalize", enc->normalize ? "1" : "0"}, {"layer", std::to_string(o.layer)},
                        {"max_length", std::to_string(enc->max_length)}})
      .or_throw();
  std::printf("%s: %zu x %lld embeddings\n", o.output.c_str(), lines.size(), static_cast<long long>(cfg.hidden));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return tg::cli::run_main(argc, argv, [&] { return run(argc, argv); }); }
