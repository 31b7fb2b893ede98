// explain_attention: runnable experiments on what learners ask about attention, written to one
// HTML report. Each trains small German->English translators on the trans-de-en pairs (or --src /
// --tgt files) for the same number of steps, through tg::train::Trainer.
//
//   1. W_Q, W_K, W_V are ordinary parameters: their gradient norms and update sizes over training,
//      beside the embedding's and the FFN's — one backward, one optimizer step.   exp1_gradients.cc
//   2. Ablation: learned projections vs. fixed identity (Q = K = V = X) vs. frozen random ones, on
//      card lookups (by equality, and "the card after this one") and in the translator.  exp2_ablation.cc
//   3. Why divide by sqrt(d_k): softmax entropy and gradient size of attention rows at d_k = 64,
//      with and without the scaling, and training curves of both.                  exp3_scaling.cc
//   4. Static vs contextual embeddings: word2vec gives an ambiguous word ("bank", "watch") one
//      vector; an encoder (of an English->German model) gives it one per sentence.    exp4_contextual.cc
//   5. An embedding lookup is a one-hot vector times the table: same output, same gradient.  exp5_one_hot.cc
//   6. Frozen pretrained word2vec vectors as the transformer's input embeddings vs learned ones.  exp6_pretrained.cc
//   7. Heads start different because they are initialised at random, and learn different patterns.  exp7_heads.cc
//   8. Attention is blind to order: learned, sinusoidal and rotary positions in the same small language
//      model of the English side, trained on 32-word windows, read on windows 4 times as long.  exp8_positions.cc
//
// Every comparison runs --seeds times (3) and reports mean ± spread; a difference is called an
// effect only when the seeds do not overlap. Experiments 2, 3 and 7 reuse experiment 1's models,
// and 6 reuses 4's: they run in this order. OUT/report.html opens with the learners' questions,
// each answered with its numbers; OUT/summary.json has every experiment's headline numbers,
// OUT/metrics.jsonl every training curve and result.
//
//   ./build/explain_attention --out runs/explain      (under 5 minutes on 2 cores; --quick: under 1)
#include <filesystem>
#include <cstdio>

#include <fmt/format.h>

#include "common.h"

int main(int argc, char** argv) {
  return tg::cli::run_main(argc, argv, [&] {
    explain::Options o;
    tg::cli::Flags flags("explain_attention", "experiments that show how attention learns, written to OUT/report.html");
    explain::define_flags(flags, o);
    flags.parse(argc, argv).or_throw();
    explain::apply_quick(flags, o);
    if (o.threads > 0) tg::set_num_threads(static_cast<int>(o.threads));
    o.dev = tg::cli::training_device(o.device);  // before any work: a missing GPU is one line
    std::fprintf(stderr, "explain_attention: the translators train on %s\n", tg::cli::describe_device(o.dev).c_str());
    tg::AutocastGuard autocast(tg::cli::precision(o.precision));
    // Every path is checked before any training: a --model given on purpose must be a model folder
    // (the default one may be absent: experiment 4 then leaves its MiniLM part out).
    if (flags.given("model") && !o.model.empty() &&
        !(std::filesystem::exists(o.model + "/config.json") && std::filesystem::exists(o.model + "/model.safetensors")))
      tg::cli::fail(fmt::format("--model {}: not a model folder (expected config.json and model.safetensors in it; "
                                "./tg.sh models fetches all-MiniLM-L6-v2)", o.model));
    tg::make_dirs(o.out).or_throw();
    tg::train::check_run_dir(o.out, /*resume=*/false, o.overwrite, /*can_resume=*/false).or_throw();

    explain::Context ctx = explain::load(o);
    tg::report::Html html("explain_attention: how attention learns");
    html.paragraph(fmt::format(
        "Questions learners ask about attention, each answered by an experiment run just now on this machine. The "
        "translators are small German->English models (2 + 2 layers, width {}, {} heads; {} training pairs, {} held out), "
        "each trained {} steps of {} pairs with the same AdamW; every comparison is repeated with {} seed{} (initialisation "
        "and data order) and shown as mean ± spread (sample standard deviation); a difference is called an effect only when "
        "every seed of one variant beats every seed of the other.",
        o.width, o.heads, ctx.de_en.train.size(), ctx.de_en.valid.size(), o.steps, o.batch, o.seeds, o.seeds == 1 ? "" : "s"));
    const size_t answers_at = html.position();
    explain::exp1_gradients(ctx, html);
    explain::exp2_ablation(ctx, html);
    explain::exp3_scaling(ctx, html);
    explain::exp4_contextual(ctx, html);
    explain::exp5_one_hot(ctx, html);
    explain::exp6_pretrained(ctx, html);
    explain::exp7_heads(ctx, html);
    explain::exp8_positions(ctx, html);
    html.answers(ctx.answers, answers_at);  // written last, read first
    html.write(o.out + "/report.html").or_throw();
    explain::write_summary(ctx);
    std::printf("wrote %s/report.html, %s/summary.json and %s\n", o.out.c_str(), o.out.c_str(), ctx.metrics->path().c_str());
    return 0;
  });
}
