// Peak memory of loading a Hugging Face BERT folder: the process's peak resident set (VmHWM)
// beside the weights file's size. float32 loads through BertModel::from_pretrained; bfloat16
// builds the same model with bfloat16 parameters (ParameterDTypeGuard, no random init) and loads
// the file into it tensor by tensor (load_pretrained). One JSON line.
//
//   python tools/make_bf16_checkpoint.py --from data/models/all-MiniLM-L6-v2 --out /tmp/minilm-bf16
//   build/load_rss --model /tmp/minilm-bf16 --dtype bf16
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <fmt/core.h>

#include "tapegrad.h"

namespace {
// A line of /proc/self/status in MB ("VmHWM", "VmRSS").
double status_mb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) / 1024.0;  // kB
  return -1;
}
}  // namespace

int main(int argc, char** argv) {
  return tg::cli::run_main(argc, argv, [&] {
    std::string model, dtype = "bf16";
    tg::cli::Flags flags("load_rss", "peak resident memory of loading a BERT folder, beside its file size");
    flags.add("model", &model, "a Hugging Face BERT folder (config.json, model.safetensors)").not_empty();
    flags.add("dtype", &dtype, "the parameters' dtype: bf16 or fp32").choices({"bf16", "fp32"});
    flags.parse(argc, argv).or_throw();
    const std::string weights = model + "/model.safetensors";
    const double file_mb = static_cast<double>(std::filesystem::file_size(weights)) / (1024.0 * 1024.0);
    const double before_mb = status_mb("VmRSS");
    std::unique_ptr<tg::BertModel> bert;
    if (dtype == "fp32") {
      bert = tg::BertModel::from_pretrained(model).value();
    } else {
      tg::BertConfig cfg = tg::BertConfig::from_json(model + "/config.json").value();
      tg::SafetensorsReader file = tg::SafetensorsReader::open(weights).value();
      cfg.pooler = file.find("pooler.dense.weight") || file.find("bert.pooler.dense.weight");
      {
        tg::ParameterDTypeGuard bf16(tg::kBFloat16);
        tg::SkipInitGuard loaded_next;
        bert = std::make_unique<tg::BertModel>(cfg);
      }
      tg::load_pretrained(*bert, file, {.strict = true, .names = tg::BertModel::hugging_face_names()}).value();
    }
    const double peak_mb = status_mb("VmHWM");
    fmt::print(R"({{"model": "{}", "dtype": "{}", "parameters": {}, "file_mb": {:.1f}, "rss_before_load_mb": {:.1f}, )"
               R"("peak_rss_mb": {:.1f}, "peak_over_file": {:.3f}, "goal_mb": {:.1f}}})"
               "\n",
               model, dtype, bert->num_parameters(), file_mb, before_mb, peak_mb, peak_mb / file_mb, 1.2 * file_mb + 100);
    return 0;
  });
}
