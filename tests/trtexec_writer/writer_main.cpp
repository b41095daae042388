// Writes tuning caches with trtexec's own writer functions (TensorRT 11.1 samples/common/sampleUtils.cpp:
// writeTuningCacheHeader, writeTuningCacheIteration), cut unchanged from a TensorRT checkout by build.py
// into nvidia_types.inc / nvidia_writer.inc (not kept in this repository). What is ours: the few
// members of AllOptions the header writer reads (same names and types as sampleOptions.h), the
// logger and startsWith stand-ins, and the iterations below, laid out as trtexec's tuning loop calls
// the writer (sampleTuning.cpp: every knob of the expression in each build_route, in the expression's
// order, a fixed knob at its pinned value; mixed search restarts `iter` at 0 for its second phase).
//
//   ./writer        -> fast.jsonl mixed.jsonl odd-values.jsonl header-only.jsonl
//   ./writer N      -> the same, and full-N.jsonl (a full search of N iterations)

#include <nlohmann/json.hpp>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace samplesCommon
{
constexpr bool startsWith(std::string_view str, std::string_view prefix)
{
    return str.size() >= prefix.size() && str.substr(0, prefix.size()) == prefix;
}
} // namespace samplesCommon
using samplesCommon::startsWith;

namespace sample
{
std::ostream& gLogError = std::cerr;

#include "nvidia_types.inc"

// The members of AllOptions that writeTuningCacheHeader reads, typed as in sampleOptions.h.
struct AllOptions
{
    struct
    {
        struct
        {
            std::string model;
        } baseModel;
    } model;
    struct
    {
        std::string engine;
    } build;
    struct
    {
        float atol{1e-5};
        float rtol{1e-5};
        float accuracyThresholdEndToEnd{};
        using RefPair
            = std::pair<std::unordered_map<std::string, std::string>, std::unordered_map<std::string, std::string>>;
        std::vector<RefPair> refPairs{1};
        AccuracyValidationAlgorithm accuracyValidationAlgorithm{AccuracyValidationAlgorithm::kL0};
    } inference;
    struct
    {
        std::string tuningExpr{};
        TuningSearchAlgorithm tuningSearchAlgorithm{TuningSearchAlgorithm::kFAST};
    } tuning;
};

std::vector<std::string> splitToStringVec(std::string const& option, char separator, int64_t maxSplit = -1);

#include "nvidia_writer.inc"
} // namespace sample

namespace
{
using Losses = std::unordered_map<std::string, double>;
double const kNaN = std::numeric_limits<double>::quiet_NaN();
double const kInf = std::numeric_limits<double>::infinity();

// The database's default route (buildDefaultPath: every knob, database order) of these caches.
std::string const kDefaultRoute
    = "-conv_use_long_w=on -gemm_splitk=1 -kgen:codegen:cuda_tile=1 -pad_channels=1 -reshape_ppg=on "
      "-softmax_impl=auto -tile:m=64";

void header(std::string const& path, sample::AllOptions const& options, std::vector<std::string> args)
{
    std::vector<char*> argv;
    for (auto& a : args)
    {
        argv.push_back(a.data());
    }
    sample::writeTuningCacheHeader(
        path, options, static_cast<int32_t>(argv.size()), argv.data(), "2.19.15", kDefaultRoute);
}

sample::AllOptions resnetOptions(std::string const& expr, sample::TuningSearchAlgorithm search)
{
    sample::AllOptions o;
    o.model.baseModel.model = "/data/models/resnet 50.onnx";
    o.build.engine = "/data/out/r50.plan";
    o.inference.accuracyThresholdEndToEnd = 1e-3F;
    o.inference.accuracyValidationAlgorithm = sample::AccuracyValidationAlgorithm::kCosineSimilarity;
    o.inference.refPairs[0].first = {{"input", "/data/in/input.bin"}, {"mask", "/data/in/mask.bin"}};
    o.inference.refPairs[0].second = {{"logits", "/data/ref/logits.bin"}, {"probs", "/data/ref/probs.bin"}};
    o.tuning.tuningExpr = expr;
    o.tuning.tuningSearchAlgorithm = search;
    return o;
}

std::vector<std::string> resnetArgv(std::string const& expr, std::string const& search, std::string const& cache)
{
    return {"trtexec", "--onnx=/data/models/resnet 50.onnx", "--tuneBuildRoutes=" + expr, "--tuningSearch=" + search,
        "--accuracyAlgorithm=cos", "--accuracyThreshold=0.001",
        "--loadInputs=input:/data/in/input.bin,mask:/data/in/mask.bin",
        "--loadRefOutputs=logits:/data/ref/logits.bin,probs:/data/ref/probs.bin", "--saveEngine=/data/out/r50.plan",
        "--tuningCacheFile=" + cache};
}

// A fast search: the baseline (every knob at its default, the fixed -pad_channels at 0, the
// never-varying -softmax_impl at its only value), then one knob changed at a time.
void fast()
{
    std::string const expr = "-tile:m=[64|128] -gemm_splitk=[1|2|4] -softmax_impl=[auto] -pad_channels=0";
    std::string const path = "fast.jsonl";
    header(path, resnetOptions(expr, sample::TuningSearchAlgorithm::kFAST), resnetArgv(expr, "fast", path));
    sample::writeTuningCacheIteration(path, 0, "-tile:m=64 -gemm_splitk=1 -softmax_impl=auto -pad_channels=0", false,
        "", Losses{{"logits", 0.0}, {"probs", 1.1920928955078125e-07}}, 1.2345678);
    sample::writeTuningCacheIteration(path, 1, "-tile:m=64 -gemm_splitk=2 -softmax_impl=auto -pad_channels=0", false,
        "", Losses{{"logits", 0.0004}, {"probs", static_cast<double>(2.5e-4F)}}, static_cast<double>(1.1F));
    sample::writeTuningCacheIteration(path, 2, "-tile:m=64 -gemm_splitk=4 -softmax_impl=auto -pad_channels=0", true,
        "Error[2]: [optimizer.cpp::compute::42] \"tile\" too large \xe2\x80\x94 \xc3\xbcnic\xc3\xb6" "de\x01\tend",
        Losses{}, 0.0);
    sample::writeTuningCacheIteration(path, 3, "-tile:m=128 -gemm_splitk=1 -softmax_impl=auto -pad_channels=0", false,
        "", Losses{{"logits", kNaN}, {"probs", 0.0}}, 0.98765);
}

// A mixed search: phase 1 is a fast scan (10 iterations); -tile:m and -gemm_splitk beat the baseline,
// so phase 2 sweeps their full product (9 iterations, iter from 0 again), repeating the baseline and
// phase 1's single-knob routes.
void mixed()
{
    std::string const expr = "-tile:m=[64|128|256] -gemm_splitk=[1|2|4] -kgen:codegen:cuda_tile=[0|1|2|3] "
                             "-reshape_ppg=[on|off] -pad_channels=0";
    std::string const path = "mixed.jsonl";
    header(path, resnetOptions(expr, sample::TuningSearchAlgorithm::kMIXED), resnetArgv(expr, "mixed", path));
    auto route = [](std::string const& m, std::string const& k, std::string const& t, std::string const& r) {
        return "-tile:m=" + m + " -gemm_splitk=" + k + " -kgen:codegen:cuda_tile=" + t + " -reshape_ppg=" + r
            + " -pad_channels=0";
    };
    struct Row
    {
        std::string route;
        bool crashed;
        double ms;
    };
    std::vector<Row> const phase1 = {{route("64", "1", "1", "on"), false, 2.0}, {route("64", "1", "1", "off"), false, 2.05},
        {route("64", "1", "0", "on"), false, 2.31}, {route("64", "1", "2", "on"), true, 0.0},
        {route("64", "1", "3", "on"), false, 2.0000001}, {route("64", "2", "1", "on"), false, 1.75},
        {route("64", "4", "1", "on"), false, 2.2}, {route("128", "1", "1", "on"), false, 1.6},
        {route("256", "1", "1", "on"), false, 2.4}, {route("64", "1", "1", "on"), false, 2.01}};
    uint64_t iter = 0;
    for (auto const& row : phase1)
    {
        sample::writeTuningCacheIteration(path, iter++, row.route, row.crashed, row.crashed ? "Segmentation fault" : "",
            Losses{{"logits", 1e-06 * static_cast<double>(iter)}}, row.ms);
    }
    iter = 0;
    for (std::string m : {"64", "128", "256"})
    {
        for (std::string k : {"1", "2", "4"})
        {
            sample::writeTuningCacheIteration(path, iter, route(m, k, "1", "on"), false, "",
                Losses{{"logits", 2e-06 * static_cast<double>(iter)}}, 1.0 + 0.1 * static_cast<double>(iter));
            ++iter;
        }
    }
}

// Values at the edges of nlohmann's number format and of what trtexec records.
void oddValues()
{
    std::string const expr = "-tile:m=[64|128] -gemm_splitk=[1|2]";
    sample::AllOptions o;
    o.model.baseModel.model = "/data/models/tiny.onnx";
    o.tuning.tuningExpr = expr;
    o.tuning.tuningSearchAlgorithm = sample::TuningSearchAlgorithm::kEXHAUSTIVE;
    std::string const path = "odd-values.jsonl";
    header(path, o, {"trtexec", "--onnx=/data/models/tiny.onnx", "--tuneBuildRoutes=" + expr, "--tuningSearch=full"});
    sample::writeTuningCacheIteration(path, 0, "-tile:m=64 -gemm_splitk=1", false, "", Losses{}, 1e-05);
    sample::writeTuningCacheIteration(path, 1, "-tile:m=64 -gemm_splitk=2", false, "", Losses{{"out", kInf}}, 0.0);
    sample::writeTuningCacheIteration(path, 2, "-tile:m=128 -gemm_splitk=1", false, "", Losses{{"out", 1e16}}, kNaN);
    sample::writeTuningCacheIteration(path, 3, "-tile:m=128 -gemm_splitk=2", false, "",
        Losses{{"out", 1234567890123456.7}, {"aux", 5e-324}}, 0.1 + 0.2);
}

void headerOnly()
{
    std::string const expr = "-tile:m=[64|128]";
    std::string const path = "header-only.jsonl";
    header(path, resnetOptions(expr, sample::TuningSearchAlgorithm::kFAST), resnetArgv(expr, "fast", path));
}

// A full search of n iterations over ten four-valued knobs (mixed-radix order, last knob fastest).
void full(uint64_t n)
{
    std::vector<std::string> knobs;
    std::string expr;
    for (int i = 0; i < 10; ++i)
    {
        knobs.push_back("-knob_" + std::to_string(i));
        expr += (i ? " " : "") + knobs.back() + "=[0|1|2|3]";
    }
    sample::AllOptions o = resnetOptions(expr, sample::TuningSearchAlgorithm::kEXHAUSTIVE);
    std::string const path = "full-" + std::to_string(n) + ".jsonl";
    header(path, o, resnetArgv(expr, "full", path));
    uint64_t state = 42;
    for (uint64_t i = 0; i < n; ++i)
    {
        std::string route;
        uint64_t rest = i;
        std::vector<uint64_t> digits(knobs.size());
        for (int64_t j = static_cast<int64_t>(knobs.size()) - 1; j >= 0; --j)
        {
            digits[j] = rest % 4;
            rest /= 4;
        }
        for (uint64_t j = 0; j < knobs.size(); ++j)
        {
            route += (j ? " " : "") + knobs[j] + "=" + std::to_string(digits[j]);
        }
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        double const u = static_cast<double>(state >> 11) / 9007199254740992.0;
        bool const crashed = i % 37 == 5;
        sample::writeTuningCacheIteration(path, i, route, crashed, crashed ? "Segmentation fault (core dumped)" : "",
            Losses{{"logits", u * 1e-3}, {"probs", u * u * 1e-4}}, 1.0 + u);
    }
}
} // namespace

int main(int argc, char** argv)
{
    fast();
    mixed();
    oddValues();
    headerOnly();
    if (argc > 1)
    {
        full(std::strtoull(argv[1], nullptr, 10));
    }
    return 0;
}
