// Accuracy baselines: round trip, regression rule, and that corpus listing
// does not mistake a baseline for an entry.
#include "harness/baseline.h"

#include <gtest/gtest.h>

#include <filesystem>

#include <unistd.h>

#include "harness/corpus.h"

namespace assay {
namespace {
namespace fs = std::filesystem;

TEST(Baseline, RoundTripAndRegressionRule) {
  const fs::path dir = fs::temp_directory_path() / ("assay_baseline_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto none = load_baseline(dir.string(), "gemm");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  Baseline b;
  b.op = "gemm";
  b.ratios["tiled"]["fp32/normal"] = 0.2;
  b.ratios["tiled"]["fp32/small_int/exact"] = 0;
  b.accepted = {{"seed", 1}};
  ASSERT_TRUE(save_baseline(dir.string(), b).ok());
  auto back = load_baseline(dir.string(), "gemm");
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((*back)->ratios, b.ratios);

  RatioTable now;
  now["tiled"]["fp32/normal"] = 0.39;  // under 2x: fine
  EXPECT_TRUE(find_regressions(**back, now).empty());
  now["tiled"]["fp32/normal"] = 0.41;  // over 2x: regression, although still under the bound
  auto r = find_regressions(**back, now);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].key, "fp32/normal");
  now["tiled"]["fp32/small_int/exact"] = 1e-9;  // rounding noise over a zero baseline: ignored
  now["naive"]["fp32/normal"] = 0.9;            // no baseline for this variant: new, not a regression
  EXPECT_EQ(find_regressions(**back, now).size(), 1u);

  // A corpus folder holding baselines/ still lists only entries.
  auto files = list_entries({dir.string()});
  ASSERT_TRUE(files.ok());
  EXPECT_TRUE(files->empty());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace assay
