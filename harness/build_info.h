// What this build of assay is: its version, the source revision it was configured from, and how it
// was built (assay --version prints them; reports carry the version and revision).
#pragma once

#include <string_view>

namespace assay {

/// The project version, e.g. "0.1.0".
std::string_view version();
/// `git describe --always --dirty --tags` of the source tree when CMake last configured the build
/// (it reconfigures when HEAD moves); "unknown" when the sources were not a git checkout.
std::string_view git_revision();
/// CMAKE_BUILD_TYPE, e.g. "RelWithDebInfo" (empty for multi-config generators).
std::string_view build_type();
/// ASSAY_CUDA_ARCHITECTURES, e.g. "80;90".
std::string_view cuda_architectures();

}  // namespace assay
