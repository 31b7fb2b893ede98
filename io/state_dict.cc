#include "io/state_dict.h"

namespace tg {

void StateDict::insert(std::string name, Tensor t) {
  TG_CHECK(!contains(name), "state_dict", "duplicate entry '{}'", name);
  index_.emplace(name, items_.size());
  items_.emplace_back(std::move(name), std::move(t));
}

const Tensor& StateDict::at(const std::string& name) const {
  auto it = index_.find(name);
  TG_CHECK(it != index_.end(), "state_dict", "no entry named '{}'", name);
  return items_[it->second].second;
}

}  // namespace tg
