// generate: continue a prompt with a Hugging Face decoder model folder (GPT-2, Llama, Mistral,
// Qwen2, SmolLM: config.json, model.safetensors or its shards, tokenizer.json), streaming the text
// to stdout as it is decoded.
//
//   ./build/generate --model tests/golden/decoders/llama --prompt "To be, or not to be" --max_new_tokens 40
//
// --temperature 0 is greedy; otherwise temperature, top-k, top-p and the repetition penalty apply in
// that order (transformers' order), drawn from --seed's generator: the same seed gives the same text
// at any thread count. Generation stops at the model's end-of-sequence token, at --stop, or after
// --max_new_tokens. Timings (prompt and generation tokens/s) go to stderr.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <tapegrad/tapegrad.h>

namespace {

struct Options {
  std::string model, prompt, prompt_file, prompt_ids, stop, precision = "fp32", device = "auto";
  int64_t max_new_tokens = 128, top_k = 40, threads = 0;
  double temperature = 0.8, top_p = 0.95, repetition_penalty = 1.0;
  uint64_t seed = 1;
  bool ids = false;
};

// The length of the longest prefix of `s` that ends on a whole UTF-8 character: what can be printed
// now; an incomplete last character waits for the next token (a decode that ends in the middle of
// one reads U+FFFD there, which is held back too).
size_t printable(const std::string& s) {
  static const std::string kReplacement = "\xEF\xBF\xBD";
  size_t n = s.size();
  if (n >= 3 && s.compare(n - 3, 3, kReplacement) == 0) n -= 3;
  return n;
}

int run(int argc, char** argv) {
  Options o;
  tg::cli::Flags f("generate", "continue a prompt with a Hugging Face decoder model (GPT-2, Llama, Mistral, Qwen2, SmolLM)");
  f.add("model", &o.model, "model folder: config.json, model.safetensors (or shards), tokenizer.json").not_empty();
  f.add("prompt", &o.prompt, "text to continue");
  f.add("prompt_file", &o.prompt_file, "read the prompt from this file instead (UTF-8)");
  f.add("prompt_ids", &o.prompt_ids, "the prompt as token ids instead, separated by spaces or commas (no tokenizer specials added)");
  f.add("max_new_tokens", &o.max_new_tokens, "most tokens to generate").range(0, 1 << 24);
  f.add("temperature", &o.temperature, "sampling temperature (0: greedy)").min(0);
  f.add("top_k", &o.top_k, "sample among the k most likely tokens (0: all)").min(0);
  f.add("top_p", &o.top_p, "sample among the most likely tokens whose probability reaches p (1: all)").range(1e-9, 1);
  f.add("repetition_penalty", &o.repetition_penalty, "divide the logits of tokens already in the text by this (1: off)").above(0);
  f.add("seed", &o.seed, "random seed for sampling");
  f.add("stop", &o.stop, "stop once the generated text contains this string (it is printed)");
  f.add("ids", &o.ids, "print token ids (prompt, then each new one) instead of text");
  f.add("threads", &o.threads, "threads (0: TG_NUM_THREADS or all cores)").range(0, 1024);
  tg::cli::add_precision(f, &o.precision);
  tg::cli::add_device(f, &o.device);
  f.check([&o] {
    const int given = !o.prompt.empty() + !o.prompt_file.empty() + !o.prompt_ids.empty();
    return given != 1 ? std::string("give one of --prompt, --prompt_file and --prompt_ids") : std::string();
  });
  f.parse(argc, argv).or_throw();
  if (o.threads > 0) tg::set_num_threads(static_cast<int>(o.threads));
  if (!o.prompt_file.empty()) o.prompt = tg::read_file(o.prompt_file).value();
  const tg::Device device = tg::cli::device(o.device);  // before loading: a GPU asked for and missing is one line

  auto lm = tg::load_causal_lm(o.model).value();
  auto tok = tg::text::Tokenizer::load_in(o.model).value();
  if (tok->size() > lm->vocab_size())
    tg::cli::fail(fmt::format("{}: the tokenizer has {} tokens but the model's vocabulary {}", o.model, tok->size(),
                              lm->vocab_size()));
  std::vector<int64_t> prompt;
  if (!o.prompt_ids.empty()) {
    for (size_t i = 0; i < o.prompt_ids.size();) {
      const size_t j = std::min(o.prompt_ids.find_first_of(" ,", i), o.prompt_ids.size());
      if (j > i) {
        const std::string id = o.prompt_ids.substr(i, j - i);
        int64_t v = -1;
        const auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), v);
        if (ec != std::errc() || end != id.data() + id.size() || v < 0 || v >= lm->vocab_size())
          tg::cli::fail(fmt::format("--prompt_ids: '{}' is not a token id in [0, {})", id, lm->vocab_size()));
        prompt.push_back(v);
      }
      i = j + 1;
    }
  } else {
    // A prompt far past the context is refused before any work that grows with it (normalizing,
    // matching added tokens, merging): it needs at least bytes / L tokens, L the longest token's
    // spelling (which is never shorter than the bytes it stands for), and NFC shrinks a text at
    // most 3 times (Hangul jamo), so 4 L bytes a position is a bound no prompt that fits reaches.
    size_t longest = 1;
    for (int64_t id = 0; id < tok->size(); ++id) longest = std::max(longest, tok->token(id).size());
    const uint64_t cap = 4 * static_cast<uint64_t>(longest) * static_cast<uint64_t>(lm->max_positions());
    if (o.prompt.size() > cap)
      tg::cli::fail(fmt::format("{}: the prompt is {} bytes, at least {} tokens; the model takes at most {}",
                                o.prompt_file.empty() ? "--prompt" : o.prompt_file, o.prompt.size(),
                                (o.prompt.size() + 4 * longest - 1) / (4 * longest), lm->max_positions()));
    try {
      prompt = tok->encode_pair(o.prompt).ids;
    } catch (const tg::Error& e) {
      tg::cli::fail(fmt::format("{}: {}", o.prompt_file.empty() ? "--prompt" : o.prompt_file, e.what()));
    }
  }
  if (prompt.empty()) tg::cli::fail("the prompt gives no tokens (and the tokenizer adds no beginning-of-text token)");
  if (static_cast<int64_t>(prompt.size()) > lm->max_positions())
    tg::cli::fail(fmt::format("the prompt is {} tokens; the model takes at most {}", prompt.size(), lm->max_positions()));
  // A weight finite in float32 but not in bfloat16 is refused by name, before any token (checked on
  // the CPU, before the model moves: on a GPU it would read each weight back).
  if (o.precision == "bf16")
    if (tg::Status s = tg::check_representable(lm->module(), tg::kBFloat16, o.model); !s.ok()) tg::cli::fail(s.message());
  lm->module().to(device);
  std::fprintf(stderr, "generate: %s, %lld parameters, vocabulary %lld, %zu prompt tokens, on %s, %d threads, %s\n",
               o.model.c_str(), static_cast<long long>(lm->module().num_parameters()),
               static_cast<long long>(lm->vocab_size()), prompt.size(), tg::cli::describe_device(device).c_str(),
               tg::num_threads(), o.precision.c_str());

  tg::AutocastGuard autocast(tg::cli::precision(o.precision));
  if (o.precision == "bf16") {
    // Round and pack every weight matrix to bfloat16 now (autocast keeps them), as a bfloat16
    // model is converted when it loads: one token through the model, its result dropped.
    const auto t0 = std::chrono::steady_clock::now();
    tg::NoGradGuard ng;
    (void)lm->forward(tg::from_vector(std::vector<int64_t>{prompt[0]}, {1, 1}).to(device), nullptr, true);
    if (device.is_cuda()) tg::cuda::synchronize(device.index);  // (the GPU's work, not just its queueing)
    std::fprintf(stderr, "generate: weights packed as bfloat16 in %.2f s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  tg::Generator gen(o.seed);
  std::vector<int64_t> generated;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  Clock::time_point first;
  bool stopped = false;
  if (o.ids) {
    for (int64_t id : prompt) std::printf("%lld ", static_cast<long long>(id));
    std::fflush(stdout);
  }
  constexpr size_t kContext = 8, kMaxPending = 16;
  std::vector<int64_t> context, pending;  // the last tokens printed; those whose text is held back
  std::string tail;                       // the last bytes printed (as long as --stop)
  auto new_text = [&] {                   // the text pending's tokens add after context's
    std::vector<int64_t> both = context;
    both.insert(both.end(), pending.begin(), pending.end());
    const std::string before = tok->decode(context), all = tok->decode(both);
    return all.compare(0, before.size(), before) == 0 ? all.substr(before.size()) : tok->decode(pending);
  };
  auto on_token = [&](int64_t id) {
    if (generated.empty()) first = Clock::now();
    if (id == lm->eos_token_id()) return false;
    generated.push_back(id);
    if (o.ids) {
      std::printf("%lld ", static_cast<long long>(id));
      std::fflush(stdout);
      return true;
    }
    // Only the new tokens are decoded, after a few printed ones (a decoder may treat a text's start
    // differently, e.g. drop SentencePiece's leading space): linear in the tokens, however many.
    pending.push_back(id);
    const std::string fresh = new_text();
    if (printable(fresh) < fresh.size() && pending.size() < kMaxPending) return true;  // a character still incomplete
    std::fwrite(fresh.data(), 1, fresh.size(), stdout);
    std::fflush(stdout);
    const std::string seen = tail + fresh;  // --stop may straddle tokens
    tail = seen.substr(seen.size() - std::min(seen.size(), o.stop.size()));
    context.insert(context.end(), pending.begin(), pending.end());
    if (context.size() > kContext) context.erase(context.begin(), context.end() - kContext);
    pending.clear();
    if (!o.stop.empty() && seen.find(o.stop) != std::string::npos) {
      stopped = true;
      return false;
    }
    return true;
  };
  tg::sample(*lm, prompt,
             {.max_new_tokens = o.max_new_tokens, .temperature = o.temperature, .top_k = o.top_k, .top_p = o.top_p,
              .repetition_penalty = o.repetition_penalty, .on_token = on_token},
             gen);
  const auto end = Clock::now();
  if (!o.ids) {  // what is left: a last character that was held back
    if (!pending.empty()) {
      const std::string fresh = new_text();
      std::fwrite(fresh.data(), 1, fresh.size(), stdout);
    }
  }
  std::printf("\n");
  std::fflush(stdout);
  const Clock::time_point prompt_end = first == Clock::time_point{} ? end : first;  // no token: all was the prompt
  const double prompt_s = std::chrono::duration<double>(prompt_end - start).count();
  const double gen_s = std::chrono::duration<double>(end - first).count();
  const size_t after_first = generated.size() > 0 ? generated.size() - 1 : 0;
  std::fprintf(stderr, "generate: prompt %zu tokens in %.3f s (%.1f tokens/s); generated %zu tokens%s, %.1f tokens/s\n",
               prompt.size(), prompt_s, prompt_s > 0 ? static_cast<double>(prompt.size()) / prompt_s : 0.0, generated.size(),
               stopped ? " (stopped at --stop)" : "", gen_s > 0 && after_first > 0 ? static_cast<double>(after_first) / gen_s : 0.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return tg::cli::run_main(argc, argv, [&] { return run(argc, argv); }); }
