// GPU tests of the rope, embedding and cross-entropy specs: the correct
// kernels pass a fuzz campaign of a few hundred cases with every check on
// (embedding_bwd by its bound alone: atomics, declared non-deterministic),
// and each planted bug of tests/mutants/rowwise for these ops is caught,
// shrunk and stored by a check that claims to catch it. A mutant that is not
// registered (yet) is skipped with a message, not passed.
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

using RowwiseSpecsGpu = GpuCampaignTest<std::string>;

TEST_P(RowwiseSpecsGpu, CorrectVariantsPass) {
  expect_campaign_passes(GetParam(), 300, 4096);
}

INSTANTIATE_TEST_SUITE_P(Ops, RowwiseSpecsGpu,
                         ::testing::Values("rope", "embedding", "embedding_bwd", "cross_entropy"));

using RowwiseSpecsGpuMutants = GpuCampaignTest<PlantedMutant>;

TEST_P(RowwiseSpecsGpuMutants, CaughtShrunkAndStored) {
  expect_mutant_caught(GetParam(), 1000, 4096, 30, dir_.string());
}

using namespace failure_kinds;

INSTANTIATE_TEST_SUITE_P(Planted, RowwiseSpecsGpuMutants,
                         ::testing::Values(PlantedMutant{"rope", "mutant_rope_wrong_pairing", {kB, kP}},
                                           PlantedMutant{"embedding_bwd", "mutant_embedding_bwd_overwrite", {kB, kE, kP}},
                                           PlantedMutant{"cross_entropy", "mutant_ce_ignore_index_ignored", {kB, kN, kE}},
                                           PlantedMutant{"cross_entropy", "mutant_ce_smoothing_wrong", {kB, kP}}),
                         [](const ::testing::TestParamInfo<PlantedMutant>& i) { return std::string(i.param.variant); });

}  // namespace
}  // namespace assay
