"""pytest examples/triton: the Triton fused softmax as a variant of assay's built-in softmax op,
and a planted bug (the load mask drops the last column) that assay must catch."""
from pathlib import Path

import assay
from softmax import launch, launch_dropped_tail

CORPUS = str(Path(__file__).parent / "corpora")

# Triton's tl.exp, tl.log and fp32 division are the approximate PTX instructions (ex2.approx,
# lg2.approx, div.full): the op's bound then uses the intrinsics' error table (fast_math).
CONTRACT = assay.Contract(fast_math=True)

test_softmax = assay.check("softmax", CONTRACT, name="triton_fused", time=30, corpus=CORPUS, max_dim=4096)(launch)

# The planted bug: passes when assay catches it (shrunk and stored under CORPUS); its stored
# cases then replay as tests that must still fail.
test_softmax_dropped_tail = assay.check("softmax", CONTRACT, name="triton_dropped_tail", time=30, corpus=CORPUS,
                                        expect_failure=True, max_dim=4096)(launch_dropped_tail)
