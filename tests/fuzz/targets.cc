#include "tests/fuzz/targets.h"

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>

#include <unistd.h>

#include "tapegrad.h"

namespace tg::fuzz {
namespace {

std::string_view view(const uint8_t* data, size_t size) { return {reinterpret_cast<const char*>(data), size}; }

// A file's contents for the loaders that read a path (gzip goes through the gzip program, BERT's
// config.json through its own reader): one private file per process, rewritten for each input.
std::string as_file(std::string_view bytes, const char* suffix) {
  // Never destroyed: the exit handler that removes the folder runs after static destructors.
  static const std::string& dir = *[] {
    char tmpl[] = "/tmp/tg_fuzz_XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    if (!d) return new std::string("/tmp");
    std::atexit([] {  // the folder and its input files go with the process
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    });
    return new std::string(d);
  }();
  const std::string path = dir + "/input" + suffix;
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  return path;
}

// Every accepted value is used, so that a loader that accepts something broken is caught too.
void safetensors(const uint8_t* data, size_t size) {
  Result<SafetensorsFile> f = parse_safetensors(view(data, size), "fuzz");
  if (!f.ok()) return;
  double sum = 0;
  for (const auto& [name, t] : f->tensors)
    if (t.numel() > 0 && t.dtype() != kBool) sum += tg::sum(t.to(kFloat64)).item();
  (void)sum;
  // What loads must save and load again unchanged.
  Result<SafetensorsFile> again = parse_safetensors(serialize_safetensors(f->tensors, f->metadata), "fuzz (again)");
  if (!again.ok() || again->tensors.size() != f->tensors.size()) std::abort();
}

using train::Trainer;

void train_state(const uint8_t* data, size_t size) {
  static Linear* model = [] {
    manual_seed(1);
    return new Linear(3, 2);
  }();
  static AdamW* opt = new AdamW(model->named_parameters(), {.lr = 1e-3});
  Result<train::TrainState> s = train::parse_train_state(view(data, size), "fuzz", *model, *opt);
  if (!s.ok()) return;
  // What loads holds finite weights (non-finite ones are refused by name).
  for (const auto& [name, p] : model->named_parameters())
    if (first_non_finite(p) >= 0) {
      std::fprintf(stderr, "train_state: accepted a non-finite %s\n", name.c_str());
      std::abort();
    }
  (void)train::serialize_train_state(*s, *model, *opt);
  // What loads is resumed in a run folder beside files the run does not own: whatever the
  // checkpoint says, resuming and training a step may change metrics.jsonl and the folder's own
  // checkpoints, and nothing else.
  namespace fs = std::filesystem;
  const std::string run = fs::path(as_file("", ".scratch")).parent_path().string() + "/run";
  const std::string outside = run + "-outside.txt";
  std::error_code ec;
  fs::remove_all(run, ec);
  fs::create_directories(run);
  const std::string metrics = "{\"kind\": \"train\", \"step\": 1, \"loss\": 2}\n";
  const std::vector<std::pair<std::string, std::string>> owned_by_others = {
      {outside, "outside"}, {run + "/tokenizer.txt", "tokenizer"}, {run + "/checkpoint-0.safetensors", "not ours"}};
  for (const auto& [path, bytes] : owned_by_others) write_file_atomic(path, bytes).or_throw();
  write_file_atomic(run + "/metrics.jsonl", metrics).or_throw();
  write_file_atomic(run + "/" + train::checkpoint_name(s->step), view(data, size)).or_throw();
  bool resumed = false;
  try {
    Trainer trainer(*model, *opt, {.run_dir = run, .max_steps = std::min<int64_t>(s->step + 1, int64_t{1} << 40), .keep_last = 1,
                                   .show_progress = false, .handle_interrupts = false});
    const Status resumed_status = trainer.resume();
    resumed = resumed_status.ok();
    if (std::getenv("TG_FUZZ_DEBUG"))
      std::fprintf(stderr, "train_state: resume: %s\n", resumed ? "ok" : resumed_status.message().c_str());
    if (resumed) {
      trainer.fit(train::ShuffledSampler(4, 2), [&](const std::vector<int64_t>& ids) {
        return train::StepOutput{tg::sum(model->forward(ones({static_cast<int64_t>(ids.size()), 3}))), 1.0};
      });
    }
  } catch (const Error& e) {
    if (std::getenv("TG_FUZZ_DEBUG")) std::fprintf(stderr, "train_state: %s\n", e.what());
  }
  // metrics.jsonl: unchanged, or (resumed) cut back no further than the checkpoint said and appended to.
  Result<std::string> log = read_file(run + "/metrics.jsonl");
  const size_t kept = resumed ? static_cast<size_t>(std::clamp<int64_t>(s->metrics_bytes, 0, static_cast<int64_t>(metrics.size())))
                              : metrics.size();
  bool changed = !log.ok() || log->compare(0, kept, metrics, 0, kept) != 0 || (!resumed && *log != metrics);
  for (const auto& [path, bytes] : owned_by_others) {
    Result<std::string> now = read_file(path);
    if (changed || !now.ok() || *now != bytes) {
      std::fprintf(stderr, "train_state: resuming changed or removed %s\n", changed ? "metrics.jsonl" : path.c_str());
      std::abort();
    }
  }
}

void word2vec(const uint8_t* data, size_t size) {
  Result<Word2Vec> w = parse_word2vec(view(data, size), "fuzz");
  if (!w.ok() || w->vocab().size() < 2) return;
  (void)w->most_similar(w->vocab().word(0), 3);
}

void vocabulary(const uint8_t* data, size_t size) {
  Result<text::Vocabulary> v = text::Vocabulary::parse(view(data, size), "fuzz");
  if (!v.ok() || v->size() == 0) return;
  (void)v->id(v->token(v->size() - 1));
}

// Every tokenizer file kind (char and word vocabularies, SentencePiece models, Hugging Face
// tokenizer.json); what loads encodes and decodes a few strings.
void tokenizer(const uint8_t* data, size_t size) {
  Result<std::unique_ptr<text::Tokenizer>> t = text::Tokenizer::parse(view(data, size), "fuzz");
  if (!t.ok()) return;
  for (const char* s : {"Hello, world!", "", "naïve café 東京 \xF0\x9F\x98\x80", "[CLS] a b [SEP]"}) {
    std::vector<int64_t> ids = (*t)->encode(s);
    (void)(*t)->decode(ids);
  }
}

// The corpus readers: lines, TSV pairs, aligned pairs (the bytes split at the first NUL), the Ding
// dictionary, and gzip-compressed text.
void readers(const uint8_t* data, size_t size) {
  const std::string_view b = view(data, size);
  (void)text::parse_lines(b, "fuzz");
  (void)text::parse_lines(b, "fuzz", {.trim = false, .skip_empty = false});
  (void)text::parse_tsv(b, "fuzz");
  (void)text::parse_ding_pairs(b, "fuzz");
  const size_t nul = b.find('\0');
  if (nul != std::string_view::npos) (void)text::parse_aligned(b.substr(0, nul), b.substr(nul + 1), "fuzz.src", "fuzz.tgt");
}

void gzip(const uint8_t* data, size_t size) {
  Result<std::string> r = read_text(as_file(view(data, size), ".gz"));
  if (r.ok()) (void)text::parse_lines(*r, "fuzz.gz");
}

void bert_config(const uint8_t* data, size_t size) {
  Result<BertConfig> c = BertConfig::from_json(as_file(view(data, size), "-config.json"));
  (void)c;
}

// sentence-transformers' files of a model folder: the first byte picks which one the rest is
// (1_Pooling/config.json, modules.json, sentence_bert_config.json); the others are absent.
void sentence_settings(const uint8_t* data, size_t size) {
  if (size == 0) return;
  namespace fs = std::filesystem;
  const std::string dir = fs::path(as_file("", ".scratch")).parent_path().string() + "/model";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir + "/1_Pooling");
  static const char* const kFiles[] = {"/1_Pooling/config.json", "/modules.json", "/sentence_bert_config.json"};
  write_file_atomic(dir + kFiles[data[0] % 3], view(data + 1, size - 1)).or_throw();
  BertConfig cfg;
  cfg.hidden = 8;
  cfg.max_positions = 12;
  Result<text::SentenceSettings> s = text::read_sentence_settings(dir, cfg);
  if (s.ok() && (s->max_length < 2 || s->max_length > cfg.max_positions)) std::abort();
}

// A whole Hugging Face decoder folder: the input is parts, each a 4-byte little-endian length and
// its bytes, written as config.json, model.safetensors, tokenizer.json and (when present)
// model.safetensors.index.json, the weights then also as model-00001-of-00001.safetensors. What
// loads runs a few tokens; every refusal is one tg::Error or Status, never a crash or a hang.
void hf_folder(const uint8_t* data, size_t size) {
  std::vector<std::string_view> parts;
  for (size_t at = 0; at + 4 <= size && parts.size() < 4;) {
    uint32_t n = 0;
    for (int b = 0; b < 4; ++b) n |= static_cast<uint32_t>(data[at + static_cast<size_t>(b)]) << (8 * b);
    at += 4;
    n = static_cast<uint32_t>(std::min<size_t>(n, size - at));
    parts.push_back(view(data + at, n));
    at += n;
  }
  namespace fs = std::filesystem;
  const std::string dir = fs::path(as_file("", ".scratch")).parent_path().string() + "/hf";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  static const char* const kFiles[] = {"/config.json", "/model.safetensors", "/tokenizer.json", "/model.safetensors.index.json"};
  for (size_t i = 0; i < parts.size(); ++i) write_file_atomic(dir + kFiles[i], parts[i]).or_throw();
  if (parts.size() == 4) write_file_atomic(dir + "/model-00001-of-00001.safetensors", parts[1]).or_throw();
  try {
    Result<std::unique_ptr<CausalLM>> lm = load_causal_lm(dir);
    if (lm.ok() && (*lm)->vocab_size() >= 2 && (*lm)->max_positions() >= 4)
      (void)sample(**lm, {0, 1}, {.max_new_tokens = 2, .temperature = 0});
    Result<std::unique_ptr<text::Tokenizer>> t = text::Tokenizer::load(dir + "/tokenizer.json");
    if (t.ok()) (void)(*t)->decode((*t)->encode("Hello, wörld \u0301\u0316!"));
  } catch (const Error&) {  // a refusal by an op (a non-finite logit, a shape): one line, as the programs print
  }
}

}  // namespace

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"safetensors", safetensors}, {"train_state", train_state}, {"word2vec", word2vec},  {"vocabulary", vocabulary},
      {"tokenizer", tokenizer},     {"readers", readers},         {"gzip", gzip},          {"bert_config", bert_config}, {"sentence_settings", sentence_settings},
      {"hf_folder", hf_folder},
  };
  return all;
}

const Target* find_target(const std::string& name) {
  for (const Target& t : targets())
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace tg::fuzz
