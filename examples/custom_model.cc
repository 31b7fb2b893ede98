// Your own model, trained by the library loop: it reads four digits and predicts their sum.
#include <cstdio>
#include <map>
#include <numeric>

#include <tapegrad/tapegrad.h>

struct DigitSum : tg::Module {  // not one of the zoo's models: any Module with registered parts
  std::shared_ptr<tg::Embedding> embed = register_module("embed", std::make_shared<tg::Embedding>(10, 16));
  std::shared_ptr<tg::Linear> hidden = register_module("hidden", std::make_shared<tg::Linear>(4 * 16, 64));
  std::shared_ptr<tg::Linear> out = register_module("out", std::make_shared<tg::Linear>(64, 37));
  tg::Tensor forward(const tg::Tensor& digits) const {  // [B, 4] -> logits [B, 37]
    tg::Tensor x = embed->forward(digits).reshape({digits.size(0), 4 * 16});
    return out->forward(tg::relu(hidden->forward(x)));
  }
};

int main(int argc, char** argv) {
  return tg::cli::run_main(argc, argv, [&] {
    std::string run_dir = "runs/digit_sum";
    bool overwrite = false;
    tg::cli::Flags flags("custom_model", "a user's own model trained with tg::train::Trainer");
    flags.add("run_dir", &run_dir, "where checkpoints and metrics.jsonl go").not_empty();
    flags.add("overwrite", &overwrite, "replace an earlier run in --run_dir");
    flags.parse(argc, argv).or_throw();

    std::vector<int64_t> digits, sums;  // 2,000 examples: four digits and their sum
    tg::Generator gen(7);
    for (int i = 0; i < 2000; ++i) {
      int64_t s = 0;
      for (int j = 0; j < 4; ++j) digits.push_back(static_cast<int64_t>(gen.next_u64() % 10)), s += digits.back();
      sums.push_back(s);
    }
    auto batch_x = [&](const std::vector<int64_t>& ids) {
      std::vector<int64_t> x;
      for (int64_t i : ids) x.insert(x.end(), digits.begin() + 4 * i, digits.begin() + 4 * i + 4);
      return tg::from_vector(x, {static_cast<int64_t>(ids.size()), 4});
    };
    auto batch_y = [&](const std::vector<int64_t>& ids) {
      std::vector<int64_t> y;
      for (int64_t i : ids) y.push_back(sums[static_cast<size_t>(i)]);
      return tg::from_vector(y, {static_cast<int64_t>(ids.size())});
    };

    tg::manual_seed(1);
    DigitSum model;
    tg::AdamW opt(model.named_parameters(), {.lr = 3e-3});
    tg::train::Trainer trainer(model, opt, {.run_dir = run_dir, .max_steps = 1500, .clip_grad_norm = 1.0,
                                            .eval_every = 250, .early_stop = {.metric = "valid_loss", .patience = 3}});
    tg::train::CrossEntropyStep step{[&](const auto& ids) { return model.forward(batch_x(ids)); }, batch_y};
    std::vector<int64_t> valid(200);  // the last 200 examples are held out
    std::iota(valid.begin(), valid.end(), 1800);
    auto evaluate = [&] {
      tg::Tensor hit = tg::eq(tg::argmax(model.forward(batch_x(valid)), 1), batch_y(valid));
      return std::map<std::string, double>{{"valid_loss", trainer.evaluate_loss({valid}, step)},
                                           {"accuracy", tg::mean(hit.to(tg::kFloat32)).item()}};
    };
    trainer.start(overwrite).or_throw();
    tg::train::FitResult r = trainer.fit(tg::train::ShuffledSampler(1800, 32), step, evaluate);
    const auto& acc = trainer.history().at("valid/accuracy");
    std::printf("%s; validation accuracy %.3f at step %lld\n", r.message.c_str(), acc.back().second,
                static_cast<long long>(r.step));
    return r.exit_code();
  });
}
