// The campaign's inputs (properties/studies/false_alarm_values.h), pinned: a digest of every
// byte fa_materialize writes (A, B, the scales, C with its gap canary and output poison) per
// (configuration, value class) over a few hundred cases each, and of fa_value over every
// class. The digests were taken from the host generator before it moved into the header it
// now shares with the device; a changed staged bit changes a digest. Also: every case the
// campaign draws is one the device generator has (no recipe_value fallback), and the judge's
// gap and poison patterns are those of the regions.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "properties/studies/false_alarm.h"

namespace assay {
namespace {

/// FNV-1a over bytes.
void fnv(uint64_t& h, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
}

/// Folds the bytes fa_materialize writes for each case of `batch` (every region, in slot
/// order) into the digest of its (config, class).
void digest_batch(FaBatch& batch, std::vector<uint64_t>& digests) {
  fa_layout(batch);
  std::vector<unsigned char> image(batch.bytes, 0);
  for (size_t i = 0; i < batch.cases.size(); ++i) ASSERT_TRUE(fa_materialize(batch, i, image.data()).ok());
  for (size_t i = 0; i < batch.cases.size(); ++i) {
    const FaCase& c = batch.cases[i];
    const FaConfig& f = c.cfg();
    const FaSlot& s = batch.slots[i];
    uint64_t& h = digests[static_cast<size_t>(c.config) * kFaClasses + static_cast<size_t>(c.cls)];
    fnv(h, image.data() + s.a, static_cast<size_t>(fa_desc_a(c).extent()) * dtype_size(f.a));
    fnv(h, image.data() + s.b, static_cast<size_t>(fa_desc_b(c).extent()) * dtype_size(f.b));
    fnv(h, image.data() + s.scale_a, 4);
    fnv(h, image.data() + s.scale_b, 4);
    fnv(h, image.data() + s.c, static_cast<size_t>(fa_desc_c(c).extent()) * dtype_size(f.out));
  }
}

// Seed 7, cases [0, 40000), max_k 600, max_mn 24, every configuration, rows config by config
// (fa_configs order), columns by class (FaClass order).
constexpr uint64_t kPinnedImages[] = {
    0x4dae97949e1dbce8ull,    0x30c3dbc275695572ull,    0x933bdfab1df7fa70ull,    0x84b4fa845b2ab202ull,
    0xcc93ecb7849e7f5full,    0x80a8fed7e4a0de24ull,    0x500cab8387b4de78ull,    0x27f3638db368ce56ull,
    0x864e34dec2fb6394ull,    0xbb8dcaa220974efeull,    0x5cbf6c7013588cafull,    0xb75d12b2220331faull,
    0x7b8d921a6d27eba3ull,    0x87ad264a64abea70ull,    0xdb1ce2057290bc28ull,    0xac5035d6eefc9440ull,
    0xfdd3c0bc9b0605d3ull,    0x2cece8ac9978c275ull,    0xa8b13a71c85542c8ull,    0xea6ef4fc4ed99744ull,
    0xac3873b4ef3d58b8ull,    0x54a57b0ea1c3ed54ull,    0x5f9aa28ac5e2df7aull,    0xc44afa9e579c0d80ull,
    0xd06d3808dd513132ull,    0x79a8c94d96885a70ull,    0x694b05b9c277e987ull,    0xd1c12e2fba227012ull,
    0x0591d2b05abd04fcull,    0x3dc36b291abda5b0ull,    0x226b4ee22365b9d4ull,    0xac9e3a8e23d91475ull,
    0xa36ab51f92aec53aull,    0xc3fe2dd751780f5eull,    0x0b62b644a45f91f7ull,    0x025db102ea7780e8ull,
    0xa04f24899613c28cull,    0x23c636d8e5811fbfull,    0xc275d023e802614bull,    0x9601449ae94ca431ull,
    0xe0a829353408a2d4ull,    0x9464ee9d362f9c74ull,    0xc0a2cd02dfe7a6fdull,    0x1ad9ef92721dd13aull,
    0x736bad498e60836dull,    0x3f2b8156c6bd29faull,    0xa19d1e5f6cb815b4ull,    0x739bc8f552cfa262ull,
    0xeaa9731e0bf14aa1ull,    0x4f37a6118f6d6327ull,    0x847315c6ceb2c194ull,    0x37ed2ef80b017f5eull,
    0xae1b60244679f595ull,    0x6db0ce05ed437952ull,    0x3fe972fc1dcda6bcull,    0x1baaf4af6104e160ull,
    0x89bed49b7ca69c7dull,    0x2879dd4d114aac0eull,    0xcc176761724aeb9full,    0x9a37feafdc2d096dull,
    0xe688c3d0d0ceb499ull,    0xc162aaa051a67999ull,    0xe24145a05c63c08eull,    0x9ad619b9ba639149ull,
    0xbe7c26796edbdeacull,    0xc4595421b26564a1ull,    0x458e569d3658d0dbull,    0x861a77cc8200ea6dull,
    0xd309153c663f4a44ull,    0x22f1c648beee0becull,    0x1bdec155d2a6b710ull,    0x1c32407bf5c89d29ull,
    0x6bf71cea6804abc7ull,    0x9ad1f3ce45e52a47ull,    0x203e688d29a24f32ull,    0x2b34bcbba069a1ebull,
    0x2c677e54f431a14cull,    0x476b91948a679e23ull,    0xc11c24409c110d77ull,    0xefc7107d14378710ull,
    0x8f5306b75c21e38eull,    0x19001b853fdda7c4ull,    0xa3afbc06fbef12e8ull,    0x1ae8d02c57ab4eaeull,
    0x594c4ee11f24543bull,    0x42e390257251adfeull,    0xdb0a78e4462f156full,    0x3feab716a776ce2dull,
    0x88b5f6db1c1e4541ull,    0x8c4040fc5bdab7bcull,    0x852ad3e8dc77d7acull,    0x06eb95ca28c6a81dull,
    0xa0b8eba5c4832885ull,    0x1b82fa399cb29cd1ull,    0x982ad3a2a66db617ull,    0xc65e109f7f9d6ef4ull,
    0x3f021a472911e4adull,    0x7d4b3cfc4a8f2cd1ull,    0x370fdc74ab982d18ull,    0xb573c4a29f87ad7bull,
    0xba2e0f3abcd79224ull,    0x29d1135db9063724ull,    0x922cd31feeac9ea8ull,    0xfa4d91243fd418d7ull,
    0x4c4e80fd45c13f46ull,    0x351b3725665c44acull,    0x95f306f6a7a2ec41ull,    0x2937ac801b8b14f3ull,
    0x20d000bff0dbc849ull,    0x57c4ca738c5d1b14ull,    0x7d6ebbf90f0b9aafull,    0x835b3f3a6de57d55ull,
    0xc23c066baa3b3591ull,    0x7969c2c14e1f3d5dull,    0x345936d9d464dd0dull,    0x372b4c14928b3614ull,
    0xabc78e1e47cb81beull,    0x63ef715501d7a570ull,    0x47ece04e9696ff83ull,    0xb57045de4c216917ull,
    0x98b299bd33e521cbull,    0x9d0f54e9999261fcull,    0x729de5b0df97eb36ull,    0x918f6568a9c5c46eull,
    0x4bb3cbfe01c8159aull,    0xcc6ab2b479a34be8ull,    0x23d97daa639627e1ull,    0xb4451ca63bb0b6b2ull,
    0x2022ab687042941full,    0x90dacd67ef71af6eull,    0xc87574925c5cecd9ull,    0x54f06a8ca0bfba44ull,
    0xaa49619875b328d5ull,    0xdd070da17feff1a5ull,    0xf25c76485a43a8bdull,    0x3ded63a9af8c5901ull,
    0x02400b3ae0b455deull,    0x1b2959aaccde7562ull,    0xc567635b56ba0f7aull,    0xa9fb81d2c718bad6ull,
    0x304be4f3cb6b1190ull,    0x347fffb41574e785ull,    0x2020be4ad4933792ull,    0x9288a7200a52dc7dull,
};

// fa_value over 997 elements of every class below, six dtypes, with and without injection.
constexpr uint64_t kPinnedValues = 0x7d37c574b4c6786eull;

TEST(FalseAlarmValues, DrawnBytesArePinnedPerConfigAndClass) {
  FaOptions o;
  o.seed = 7;
  o.max_k = 600;
  o.max_mn = 24;
  const auto sel = fa_select(o);
  ASSERT_TRUE(sel.ok());
  std::vector<uint64_t> digests(fa_configs().size() * kFaClasses, 0xcbf29ce484222325ull);
  std::vector<int64_t> count(digests.size(), 0);
  FaBatch batch;
  for (int64_t i = 0; i < 40000; ++i) {
    const FaCase c = fa_make_case(o, *sel, i);
    ++count[static_cast<size_t>(c.config) * kFaClasses + static_cast<size_t>(c.cls)];
    batch.cases.push_back(c);
    if (batch.cases.size() == 500 || i + 1 == 40000) {
      digest_batch(batch, digests);
      batch.cases.clear();
    }
  }
  std::string table;
  for (size_t i = 0; i < digests.size(); ++i)
    table += fmt::format("    0x{:016x}ull,{}", digests[i], i % 4 == 3 ? "\n" : "");
  ASSERT_EQ(std::size(kPinnedImages), digests.size()) << "digests now:\n" << table;
  for (size_t i = 0; i < digests.size(); ++i) {
    const std::string where = fmt::format("config {} class {}", fa_configs()[i / kFaClasses].name,
                                          fa_class_name(static_cast<FaClass>(i % kFaClasses)));
    EXPECT_GE(count[i], 200) << where;
    EXPECT_EQ(digests[i], kPinnedImages[i]) << where << "; digests now:\n" << table;
  }
}

TEST(FalseAlarmValues, ValuesArePinnedForEveryClass) {
  uint64_t h = 0xcbf29ce484222325ull;
  const ValueClass classes[] = {ValueClass::kNormal,     ValueClass::kUniform,    ValueClass::kSameSign,
                                ValueClass::kSmallInt,   ValueClass::kNaN,        ValueClass::kLogUniform,
                                ValueClass::kNearOverflow, ValueClass::kSubnormal, ValueClass::kSignedZero,
                                ValueClass::kPareto};  // Pareto: the host's recipe_value fallback
  const DType types[] = {DType::kF32, DType::kF16, DType::kE4M3, DType::kI8, DType::kBF16, DType::kE5M2};
  for (ValueClass vc : classes)
    for (DType t : types)
      for (int inject = 0; inject < 2; ++inject) {
        ValueRecipe r;
        r.cls = vc;
        r.seed = 1234 + static_cast<uint64_t>(vc);
        r.scale = 3;
        r.int_range = 17;
        r.exp_min = -5;
        r.exp_max = 9;
        if (inject != 0) {
          r.inject.kinds = kSpecialAll;
          r.inject.rate = 0.05;
          r.inject.at = kAtFirst | kAtLast;
        }
        for (uint64_t i = 0; i < 997; ++i) {
          const double v = fa_value(r, t, 2, 997, i);
          fnv(h, reinterpret_cast<const unsigned char*>(&v), sizeof v);
        }
      }
  EXPECT_EQ(h, kPinnedValues) << fmt::format("now 0x{:016x}", h);
}

TEST(FalseAlarmValues, EveryCaseTheCampaignDrawsIsOneTheDeviceDraws) {
  // The device has no recipe_value: every recipe fa_make_case makes must be one fa_gen has.
  FaOptions o;
  o.seed = 99;
  const auto sel = fa_select(o);
  ASSERT_TRUE(sel.ok());
  for (int64_t i = 0; i < 200000; ++i) {
    const FaCase c = fa_make_case(o, *sel, i);
    ASSERT_TRUE(fa_gen_supports(c.ra) && fa_gen_supports(c.rb) && fa_gen_supports(c.rc)) << "case " << i;
  }
  ValueRecipe pareto;
  pareto.cls = ValueClass::kPareto;
  EXPECT_FALSE(fa_gen_supports(pareto));
  FaBatch batch;
  batch.cases.push_back(fa_make_case(o, *sel, 0));
  batch.cases[0].rb = pareto;
  fa_layout(batch);
  std::vector<FaRegion> regions;
  EXPECT_EQ(fa_batch_regions(batch, regions).code(), StatusCode::kInvalidArgument);
}

TEST(FalseAlarmValues, RegionsAreTheCaseLayout) {
  // Five regions per case at its slots, the views of fa_desc_*, C poisoned where beta == 0,
  // the scales as constants; an element outside a view holds the gap canary.
  FaOptions o;
  o.seed = 5;
  const auto sel = fa_select(o);
  ASSERT_TRUE(sel.ok());
  FaBatch batch;
  for (int64_t i = 0; i < 200; ++i) batch.cases.push_back(fa_make_case(o, *sel, i));
  fa_layout(batch);
  std::vector<FaRegion> regions;
  ASSERT_TRUE(fa_batch_regions(batch, regions).ok());
  ASSERT_EQ(regions.size(), 5 * batch.cases.size());
  for (size_t i = 0; i < batch.cases.size(); ++i) {
    const FaCase& c = batch.cases[i];
    const FaRegion* r = &regions[5 * i];
    EXPECT_EQ(r[0].dst, batch.slots[i].a);
    EXPECT_EQ(r[0].extent, fa_desc_a(c).extent());
    EXPECT_EQ(r[1].dst, batch.slots[i].b);
    EXPECT_EQ(r[1].extent, fa_desc_b(c).extent());
    EXPECT_EQ(r[2].dst, batch.slots[i].scale_a);
    EXPECT_EQ(r[2].mode, kFaRegionConstant);
    EXPECT_EQ(r[2].constant, c.scale_a);
    EXPECT_EQ(r[3].dst, batch.slots[i].scale_b);
    EXPECT_EQ(r[3].constant, c.scale_b);
    EXPECT_EQ(r[4].dst, batch.slots[i].c);
    EXPECT_EQ(r[4].extent, fa_desc_c(c).extent());
    EXPECT_EQ(r[4].mode, c.beta != 0 ? kFaRegionValues : kFaRegionPoison);
    for (int k = 0; k < 5; ++k) {
      unsigned char canary[8], poison[8], got[8];
      write_gap_canary(r[k].dtype, canary);
      write_output_poison(r[k].dtype, poison);
      std::memcpy(got, &r[k].canary, 8);  // little-endian
      EXPECT_EQ(std::memcmp(got, canary, r[k].size), 0);
      std::memcpy(got, &r[k].poison, 8);
      EXPECT_EQ(std::memcmp(got, poison, r[k].size), 0);
      if (r[k].offset > 0) {
        EXPECT_EQ(fa_region_logical(r[k], 0), -1);
      }
      EXPECT_EQ(fa_region_logical(r[k], r[k].offset), 0);
      EXPECT_EQ(fa_region_logical(r[k], r[k].extent - 1), r[k].batch * r[k].rows * r[k].cols - 1);
    }
  }
}

TEST(FalseAlarmValues, LogicalIndexIsTheSameInBothIntegerWidths) {
  // fa_region_logical divides in 32 bits where the allocation allows, else in 64.
  FaRegion r;
  r.offset = 3;
  r.batch = 3;
  r.rows = 4;
  r.cols = 5;
  r.ld = 7;
  r.stride = 31;
  r.extent = r.offset + (r.batch - 1) * r.stride + (r.rows - 1) * r.ld + r.cols;
  FaRegion wide = r;
  wide.extent = int64_t{1} << 33;
  int64_t covered = 0;
  for (int64_t lin = 0; lin < r.extent; ++lin) {
    const int64_t l = fa_region_logical(r, lin);
    EXPECT_EQ(l, fa_region_logical(wide, lin)) << lin;
    if (l < 0) continue;
    ++covered;
    const int64_t b = l / (r.rows * r.cols), i = l / r.cols % r.rows, j = l % r.cols;
    EXPECT_EQ(lin, r.offset + b * r.stride + i * r.ld + j);
  }
  EXPECT_EQ(covered, r.batch * r.rows * r.cols);
}

}  // namespace
}  // namespace assay
