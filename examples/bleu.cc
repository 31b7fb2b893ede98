// bleu: corpus BLEU of a system's output against references, as sacreBLEU computes it (13a
// tokenization, BLEU-4, brevity penalty, exp smoothing). One sentence a line in both files.
//
//   ./build/bleu --ref newstest.en < system_output.en
//   ./build/bleu --ref valid.en --hyp runs/multi30k/valid_hypotheses.txt
#include <cstdio>
#include <iostream>
#include <iterator>

#include <tapegrad/tapegrad.h>

int main(int argc, char** argv) {
  return tg::cli::run_main(argc, argv, [&] {
    std::string ref, hyp;
    int64_t width = 2;
    tg::cli::Flags flags("bleu", "corpus BLEU of hypotheses against references, as sacreBLEU 2.x computes it");
    flags.add("ref", &ref, "references, one a line (.gz accepted)").not_empty();
    flags.add("hyp", &hyp, "hypotheses, one a line (default: standard input)");
    flags.add("width", &width, "decimals of the score (sacreBLEU's -w)").range(0, 10);
    flags.parse(argc, argv).or_throw();
    const tg::text::LineOptions keep{.trim = false, .skip_empty = false};
    std::vector<std::string> refs = tg::text::read_lines(ref, keep).value();
    std::vector<std::string> hyps;
    if (hyp.empty()) {
      std::string all((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
      hyps = tg::text::parse_lines(all, "<stdin>", keep).value();
    } else {
      hyps = tg::text::read_lines(hyp, keep).value();
    }
    if (hyps.size() != refs.size())
      tg::cli::fail(fmt::format("{} has {} lines but {} has {}: one hypothesis per reference", hyp.empty() ? "<stdin>" : hyp,
                                hyps.size(), ref, refs.size()));
    const tg::text::Bleu b = tg::text::corpus_bleu(hyps, refs);
    std::printf("BLEU = %.*f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)\n",
                static_cast<int>(width), b.score,
                b.precisions[0], b.precisions[1], b.precisions[2], b.precisions[3], b.bp,
                b.ref_len > 0 ? static_cast<double>(b.sys_len) / static_cast<double>(b.ref_len) : 0.0,
                static_cast<long long>(b.sys_len), static_cast<long long>(b.ref_len));
    return 0;
  });
}
