#include "tests/fuzz/targets.h"

#include <cstdio>
#include <cstdlib>
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

void train_state(const uint8_t* data, size_t size) {
  static Linear* model = [] {
    manual_seed(1);
    return new Linear(3, 2);
  }();
  static AdamW* opt = new AdamW(model->named_parameters(), {.lr = 1e-3});
  Result<train::TrainState> s = train::parse_train_state(view(data, size), "fuzz", *model, *opt);
  if (s.ok()) (void)train::serialize_train_state(*s, *model, *opt);
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

}  // namespace

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"safetensors", safetensors}, {"train_state", train_state}, {"word2vec", word2vec},  {"vocabulary", vocabulary},
      {"tokenizer", tokenizer},     {"readers", readers},         {"gzip", gzip},          {"bert_config", bert_config},
  };
  return all;
}

const Target* find_target(const std::string& name) {
  for (const Target& t : targets())
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace tg::fuzz
