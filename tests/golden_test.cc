// Golden test: forward values and gradients of a sample of ops against PyTorch.
//
// tests/golden/ops_golden.txt is written by tests/golden/make_golden.py (run it with
// a Python with PyTorch 2.4 or newer). Every case there holds the inputs in0, in1, ..., a weight w,
// torch's output and, for each float input K, gradK = d((out * w).sum()) / d(inK). Each case must
// have exactly one entry in kCases below (and vice versa): adding a case is one line here and
// one in make_golden.py.
#include <gtest/gtest.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad.h"

namespace {

using tg::Tensor;
using Inputs = std::vector<Tensor>;
using CaseFn = std::function<Tensor(const Inputs&)>;

constexpr double kRelTol = 1e-9;
constexpr double kAbsTol = 1e-10;

// ---- The table: case name -> the same op in tapegrad ------------------------------------------
// Inputs arrive in file order (in0, in1, ...): float64 inputs with requires_grad, int64 as is.
const std::vector<std::pair<std::string, CaseFn>>& case_table() {
  static const std::vector<std::pair<std::string, CaseFn>> table = {
      // Elementwise binary, broadcasting [3,1,4] with [2,4].
      {"add_bcast", [](const Inputs& x) { return tg::add(x[0], x[1]); }},
      {"sub_bcast", [](const Inputs& x) { return tg::sub(x[0], x[1]); }},
      {"mul_bcast", [](const Inputs& x) { return tg::mul(x[0], x[1]); }},
      {"div_bcast", [](const Inputs& x) { return tg::div(x[0], x[1]); }},
      {"pow_bcast", [](const Inputs& x) { return tg::pow(x[0], x[1]); }},
      {"maximum_bcast", [](const Inputs& x) { return tg::maximum(x[0], x[1]); }},
      {"minimum_bcast", [](const Inputs& x) { return tg::minimum(x[0], x[1]); }},
      // Elementwise unary.
      {"exp", [](const Inputs& x) { return tg::exp(x[0]); }},
      {"log", [](const Inputs& x) { return tg::log(x[0]); }},
      {"sqrt", [](const Inputs& x) { return tg::sqrt(x[0]); }},
      {"rsqrt", [](const Inputs& x) { return tg::rsqrt(x[0]); }},
      {"tanh", [](const Inputs& x) { return tg::tanh(x[0]); }},
      {"sigmoid", [](const Inputs& x) { return tg::sigmoid(x[0]); }},
      {"relu", [](const Inputs& x) { return tg::relu(x[0]); }},
      {"gelu", [](const Inputs& x) { return tg::gelu(x[0]); }},
      {"gelu_tanh", [](const Inputs& x) { return tg::gelu(x[0], tg::GeluApprox::kTanh); }},
      {"silu", [](const Inputs& x) { return tg::silu(x[0]); }},
      {"abs", [](const Inputs& x) { return tg::abs(x[0]); }},
      // Reductions.
      {"sum_axes02", [](const Inputs& x) { return tg::sum(x[0], {0, 2}, false); }},
      {"mean_axis1_keepdim", [](const Inputs& x) { return tg::mean(x[0], {1}, true); }},
      {"var_last", [](const Inputs& x) { return tg::var(x[0], {-1}); }},
      {"logsumexp_axis1", [](const Inputs& x) { return tg::logsumexp(x[0], {1}); }},
      {"amax_axis0", [](const Inputs& x) { return tg::amax(x[0], {0}); }},
      {"max_dim1_values", [](const Inputs& x) { return tg::max(x[0], 1).values; }},
      // Softmax family.
      {"softmax_last", [](const Inputs& x) { return tg::softmax(x[0], -1); }},
      {"softmax_dim0", [](const Inputs& x) { return tg::softmax(x[0], 0); }},
      {"log_softmax_last", [](const Inputs& x) { return tg::log_softmax(x[0], -1); }},
      {"log_softmax_dim0", [](const Inputs& x) { return tg::log_softmax(x[0], 0); }},
      // Matmul.
      {"matmul_2d", [](const Inputs& x) { return tg::matmul(x[0], x[1]); }},
      {"matmul_batched_bcast", [](const Inputs& x) { return tg::matmul(x[0], x[1]); }},
      {"matmul_transpose_b", [](const Inputs& x) { return tg::matmul(x[0], x[1], false, true); }},
      // Shape and movement.
      {"permute", [](const Inputs& x) { return tg::permute(x[0], {2, 0, 1}); }},
      {"transpose", [](const Inputs& x) { return tg::transpose(x[0], 0, 2); }},
      {"expand", [](const Inputs& x) { return tg::expand(x[0], {2, 3, 4}); }},
      {"slice_step2", [](const Inputs& x) { return tg::slice(x[0], 1, 1, 6, 2); }},
      {"slice_neg_start", [](const Inputs& x) { return tg::slice(x[0], 0, -5, 6, 2); }},
      {"concat_dim1", [](const Inputs& x) { return tg::concat({x[0], x[1], x[2]}, 1); }},
      {"index_select_dim0", [](const Inputs& x) { return tg::index_select(x[0], 0, x[1]); }},
      {"gather_dim1", [](const Inputs& x) { return tg::gather(x[0], 1, x[1]); }},
      {"embedding", [](const Inputs& x) { return tg::embedding(x[0], x[1]); }},
      // Losses and normalisation.
      {"cross_entropy_ignore_smooth",
       [](const Inputs& x) {
         tg::CrossEntropyOptions o;
         o.ignore_index = -100;
         o.label_smoothing = 0.1;
         return tg::cross_entropy(x[0], x[1], o);
       }},
      {"nll_loss", [](const Inputs& x) { return tg::nll_loss(x[0], x[1], -100); }},
      {"bce_with_logits", [](const Inputs& x) { return tg::binary_cross_entropy_with_logits(x[0], x[1]); }},
      {"layer_norm_affine", [](const Inputs& x) { return tg::layer_norm(x[0], 1, x[1], x[2], 1e-5); }},
      {"rms_norm_affine", [](const Inputs& x) { return tg::rms_norm(x[0], x[1], 1e-6); }},
      {"rotary_embedding", [](const Inputs& x) {
         // Angles position x 10000^(-2i/d) at the positions in x[1], as make_golden.py's rotary().
         const int64_t d = x[0].size(-1), T = x[1].numel();
         std::vector<double> ang;
         for (int64_t t = 0; t < T; ++t)
           for (int64_t i = 0; i < d / 2; ++i)
             ang.push_back(static_cast<double>(x[1].data<int64_t>()[t]) / std::pow(10000.0, 2.0 * i / d));
         Tensor a = tg::from_vector(ang, {T, d / 2}, tg::kFloat64);
         return tg::rotary_embedding(x[0], tg::cos(a), tg::sin(a));
       }},
      {"sdpa_gqa_causal", [](const Inputs& x) { return tg::flash_attention(x[0], x[1], x[2], {.causal = true}); }},
      // Selection (bool masks are stored as int64 0/1).
      {"where_bcast", [](const Inputs& x) { return tg::where(tg::to(x[0], tg::kBool), x[1], x[2]); }},
      {"masked_fill_bcast", [](const Inputs& x) { return tg::masked_fill(x[0], tg::to(x[1], tg::kBool), -1.5); }},
  };
  return table;
}

// ---- The file ---------------------------------------------------------------------------------

struct GoldenTensor {
  bool is_int = false;
  tg::Shape shape;
  std::vector<double> f;   // float64 values
  std::vector<int64_t> i;  // int64 values
};

struct GoldenCase {
  std::string name;
  int line = 0;
  std::map<std::string, GoldenTensor> tensors;  // by role
};

struct GoldenFile {
  std::string error;  // empty when the whole file parsed
  std::vector<GoldenCase> cases;
};

std::vector<std::string> split_ws(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string tok;
  while (in >> tok) out.push_back(tok);
  return out;
}

bool parse_int(const std::string& s, int64_t& v) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long r = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size()) return false;
  v = static_cast<int64_t>(r);
  return true;
}

bool parse_double(const std::string& s, double& v) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double r = std::strtod(s.c_str(), &end);
  if (errno == ERANGE && std::fabs(r) == HUGE_VAL) return false;
  if (end != s.c_str() + s.size()) return false;
  v = r;
  return true;
}

bool valid_role(const std::string& role) {
  if (role == "w" || role == "out") return true;
  for (const char* prefix : {"in", "grad"}) {
    std::string p(prefix);
    if (role.size() > p.size() && role.compare(0, p.size(), p) == 0) {
      int64_t k;
      std::string digits = role.substr(p.size());
      if (digits.find_first_not_of("0123456789") == std::string::npos && parse_int(digits, k) && k < 64) return true;
    }
  }
  return false;
}

// Parses "tensor ROLE DTYPE RANK d0 .. v0 ..". Returns an error message, or "" on success.
std::string parse_tensor(const std::vector<std::string>& tok, std::string& role, GoldenTensor& t) {
  if (tok.size() < 4) return "a tensor line needs at least 'tensor ROLE DTYPE RANK'";
  role = tok[1];
  if (!valid_role(role)) return "unknown role '" + role + "'";
  const std::string& dtype = tok[2];
  if (dtype == "int64") {
    t.is_int = true;
  } else if (dtype != "float64") {
    return "unknown dtype '" + dtype + "' (expected float64 or int64)";
  }
  int64_t rank;
  if (!parse_int(tok[3], rank) || rank < 0 || rank > 8) return "bad rank '" + tok[3] + "'";
  size_t pos = 4;
  if (tok.size() < pos + static_cast<size_t>(rank)) return "fewer dims than the rank";
  int64_t numel = 1;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n;
    if (!parse_int(tok[pos], n) || n < 0 || n > (int64_t{1} << 24)) return "bad dim '" + tok[pos] + "'";
    t.shape.push_back(n);
    numel *= n;
    if (numel > (int64_t{1} << 24)) return "tensor too large";
    ++pos;
  }
  size_t nvals = tok.size() - pos;
  if (static_cast<int64_t>(nvals) != numel)
    return "shape " + t.shape.str() + " needs " + std::to_string(numel) + " values, the line has " +
           std::to_string(nvals);
  for (; pos < tok.size(); ++pos) {
    if (t.is_int) {
      int64_t v;
      if (!parse_int(tok[pos], v)) return "bad int64 value '" + tok[pos] + "'";
      t.i.push_back(v);
    } else {
      double v;
      if (!parse_double(tok[pos], v)) return "bad float64 value '" + tok[pos] + "'";
      t.f.push_back(v);
    }
  }
  return "";
}

GoldenFile parse_golden(const std::string& path) {
  GoldenFile gf;
  std::ifstream in(path);
  if (!in) {
    gf.error = "cannot open " + path;
    return gf;
  }
  std::set<std::string> names;
  GoldenCase cur;
  bool in_case = false;
  std::string line;
  int lineno = 0;
  auto fail = [&](const std::string& msg) {
    gf.error = path + ":" + std::to_string(lineno) + ": " + msg;
    gf.cases.clear();
    return gf;
  };
  while (std::getline(in, line)) {
    ++lineno;
    std::vector<std::string> tok = split_ws(line);
    if (tok.empty() || tok[0][0] == '#') continue;
    if (tok[0] == "case") {
      if (in_case) return fail("'case' before the previous case's 'end'");
      if (tok.size() != 2) return fail("expected 'case NAME'");
      if (!names.insert(tok[1]).second) return fail("duplicate case '" + tok[1] + "'");
      cur = GoldenCase{tok[1], lineno, {}};
      in_case = true;
    } else if (tok[0] == "tensor") {
      if (!in_case) return fail("'tensor' outside a case");
      std::string role;
      GoldenTensor t;
      std::string err = parse_tensor(tok, role, t);
      if (!err.empty()) return fail(err);
      if (cur.tensors.count(role)) return fail("duplicate role '" + role + "'");
      cur.tensors.emplace(role, std::move(t));
    } else if (tok[0] == "end") {
      if (!in_case) return fail("'end' outside a case");
      if (tok.size() != 1) return fail("trailing tokens after 'end'");
      // Structure: in0..inN contiguous, w and out present and float, gradK only for float inK.
      size_t nin = 0;
      while (cur.tensors.count("in" + std::to_string(nin))) ++nin;
      if (nin == 0) return fail("case '" + cur.name + "' has no in0");
      for (const char* r : {"w", "out"}) {
        auto it = cur.tensors.find(r);
        if (it == cur.tensors.end()) return fail("case '" + cur.name + "' has no '" + r + "'");
        if (it->second.is_int) return fail("case '" + cur.name + "': '" + r + "' must be float64");
      }
      if (cur.tensors.at("w").shape != cur.tensors.at("out").shape)
        return fail("case '" + cur.name + "': w and out have different shapes");
      for (const auto& [role, t] : cur.tensors) {
        if (role.compare(0, 2, "in") == 0 && std::stoul(role.substr(2)) >= nin)
          return fail("case '" + cur.name + "': inputs are not numbered in0.." + std::to_string(nin - 1));
        if (role.compare(0, 4, "grad") == 0) {
          std::string in_role = "in" + role.substr(4);
          auto it = cur.tensors.find(in_role);
          if (it == cur.tensors.end()) return fail("case '" + cur.name + "': " + role + " without " + in_role);
          if (it->second.is_int || t.is_int) return fail("case '" + cur.name + "': " + role + " of an int64 input");
          if (it->second.shape != t.shape) return fail("case '" + cur.name + "': " + role + " shape differs from " + in_role);
        }
      }
      gf.cases.push_back(std::move(cur));
      in_case = false;
    } else {
      return fail("unknown record '" + tok[0] + "'");
    }
  }
  if (in_case) return fail("file ends inside case '" + cur.name + "' (missing 'end')");
  if (gf.cases.empty()) return fail("no cases");
  return gf;
}

const GoldenFile& golden() {
  static const GoldenFile gf = parse_golden(std::string(TG_TEST_DATA_DIR) + "/golden/ops_golden.txt");
  return gf;
}

// ---- Comparison -------------------------------------------------------------------------------

std::string index_str(int64_t flat, const tg::Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = shape.rank() - 1; d >= 0; --d) {
    idx[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
  std::string s = "[";
  for (size_t d = 0; d < idx.size(); ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

// Checks got against the golden values; reports the first mismatch and how many there are.
::testing::AssertionResult close_to(const std::string& what, const Tensor& got, const GoldenTensor& want) {
  if (!got.defined()) return ::testing::AssertionFailure() << what << ": tapegrad gave no tensor (undefined)";
  if (got.dtype() != tg::kFloat64)
    return ::testing::AssertionFailure() << what << ": dtype " << tg::dtype_name(got.dtype()) << ", expected float64";
  if (got.shape() != want.shape)
    return ::testing::AssertionFailure() << what << ": shape " << got.shape().str() << ", expected "
                                         << want.shape.str();
  std::vector<double> g = got.to_vector<double>();
  int64_t bad = 0, first = -1;
  for (size_t k = 0; k < g.size(); ++k) {
    double w = want.f[k];
    bool ok = std::isnan(w) ? std::isnan(g[k]) : std::fabs(g[k] - w) <= kAbsTol + kRelTol * std::fabs(w);
    if (!ok) {
      if (first < 0) first = static_cast<int64_t>(k);
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  char buf[160];
  std::snprintf(buf, sizeof buf, "got %.17g, torch %.17g (diff %.3g)", g[first], want.f[first],
                std::fabs(g[first] - want.f[first]));
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << g.size()
                                       << " elements differ; first at " << index_str(first, want.shape) << ": "
                                       << buf;
}

Tensor make_input(const GoldenTensor& t) {
  if (t.is_int) return tg::from_vector<int64_t>(t.i, t.shape, tg::kInt64);
  Tensor x = tg::from_vector(t.f, t.shape, tg::kFloat64);
  x.requires_grad_();
  return x;
}

// ---- Tests ------------------------------------------------------------------------------------

TEST(Golden, FileParses) {
  const GoldenFile& gf = golden();
  ASSERT_TRUE(gf.error.empty()) << gf.error;
  EXPECT_GE(gf.cases.size(), 25u);
}

// Every case in the file has a lambda and every lambda has a case, so nothing passes by omission.
TEST(Golden, TableMatchesFile) {
  const GoldenFile& gf = golden();
  ASSERT_TRUE(gf.error.empty()) << gf.error;
  std::set<std::string> in_table, in_file;
  for (const auto& [name, fn] : case_table()) {
    EXPECT_TRUE(in_table.insert(name).second) << "case '" << name << "' appears twice in the table";
  }
  for (const GoldenCase& c : gf.cases) in_file.insert(c.name);
  for (const std::string& n : in_file)
    EXPECT_TRUE(in_table.count(n)) << "case '" << n << "' is in ops_golden.txt but has no lambda in golden_test.cc";
  for (const std::string& n : in_table)
    EXPECT_TRUE(in_file.count(n)) << "case '" << n << "' has a lambda but is not in ops_golden.txt "
                                  << "(rerun tests/golden/make_golden.py)";
}

class GoldenOp : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenOp, MatchesTorch) {
  const std::string& name = GetParam();
  const GoldenFile& gf = golden();
  ASSERT_TRUE(gf.error.empty()) << gf.error;
  const GoldenCase* c = nullptr;
  for (const GoldenCase& gc : gf.cases)
    if (gc.name == name) c = &gc;
  ASSERT_NE(c, nullptr) << "case '" << name << "' is not in ops_golden.txt";
  CaseFn fn;
  for (const auto& [n, f] : case_table())
    if (n == name) fn = f;
  ASSERT_TRUE(fn);
  SCOPED_TRACE("golden case '" + name + "' (ops_golden.txt line " + std::to_string(c->line) + ")");

  Inputs inputs;
  for (size_t k = 0;; ++k) {
    auto it = c->tensors.find("in" + std::to_string(k));
    if (it == c->tensors.end()) break;
    inputs.push_back(make_input(it->second));
  }
  try {
    Tensor out = fn(inputs);
    ASSERT_TRUE(close_to(name + " out", out, c->tensors.at("out")));
    Tensor w = tg::from_vector(c->tensors.at("w").f, c->tensors.at("w").shape, tg::kFloat64);
    tg::sum(tg::mul(out, w)).backward();
  } catch (const std::exception& e) {
    FAIL() << name << ": tapegrad threw: " << e.what();
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    std::string in_role = "in" + std::to_string(k), grad_role = "grad" + std::to_string(k);
    const GoldenTensor& in = c->tensors.at(in_role);
    auto g = c->tensors.find(grad_role);
    if (in.is_int) continue;
    if (g == c->tensors.end()) {
      ADD_FAILURE() << name << ": float input " << in_role << " has no " << grad_role << " in ops_golden.txt";
      continue;
    }
    EXPECT_TRUE(close_to(name + " " + grad_role + " (d/d" + in_role + ")", inputs[k].grad(), g->second));
  }
}

std::vector<std::string> table_names() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : case_table()) names.push_back(name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenOp, ::testing::ValuesIn(table_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
