// GPU tests of the softmax and normalisation specs: the correct kernels pass
// a fuzz campaign with every check on, and each planted bug of
// tests/mutants/rowwise is caught (and shrunk and stored) by the check that
// claims to catch it.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include <unistd.h>

#include "harness/campaign.h"
#include "harness/corpus.h"
#include "harness/gpu/lane.h"
#include "harness/spec.h"
#include "tests/properties/campaign_checks.h"

namespace assay {
namespace {

using RowwiseGpu = GpuCampaignTest<std::string>;

TEST_P(RowwiseGpu, CorrectVariantsPass) {
  expect_campaign_passes(GetParam(), 600, 4096);
}

INSTANTIATE_TEST_SUITE_P(Ops, RowwiseGpu,
                         ::testing::Values("softmax", "softmax_bwd", "layernorm", "layernorm_bwd", "rmsnorm",
                                           "rmsnorm_bwd"));

using RowwiseGpuMutants = GpuCampaignTest<PlantedMutant>;

TEST_P(RowwiseGpuMutants, CaughtShrunkAndStored) {
  expect_mutant_caught(GetParam(), 2000, 4096, 30, dir_.string());
}

using namespace failure_kinds;

INSTANTIATE_TEST_SUITE_P(
    Planted, RowwiseGpuMutants,
    ::testing::Values(PlantedMutant{"softmax", "mutant_softmax_no_max", {kN, kB}},
                      PlantedMutant{"softmax", "mutant_softmax_vec_tail", {kB, kU, kP}},
                      PlantedMutant{"softmax_bwd", "mutant_softmax_bwd_no_sum", {kB}},
                      PlantedMutant{"layernorm", "mutant_layernorm_one_pass", {kB, kN}},
                      PlantedMutant{"layernorm_bwd", "mutant_layernorm_dbeta_skip_last_row", {kB}},
                      PlantedMutant{"layernorm_bwd", "mutant_layernorm_bwd_race", {kB, kD}},
                      PlantedMutant{"rmsnorm", "mutant_rmsnorm_no_eps", {kN, kB}},
                      PlantedMutant{"rmsnorm_bwd", "mutant_rmsnorm_bwd_no_projection", {kB}},
                      PlantedMutant{"embedding", "mutant_embedding_fwd_off_by_one", {kB, kN, kE}}),
    [](const ::testing::TestParamInfo<PlantedMutant>& i) { return std::string(i.param.variant); });

}  // namespace
}  // namespace assay
