// Graceful stop on SIGINT / SIGTERM. A signal only records itself here; the
// campaign sees it between jobs, kills its workers, stores every failure found
// so far (shrunk as far as it got), writes its reports and returns; the CLI then
// exits 128 + signal (130 for SIGINT, 143 for SIGTERM). A second signal of the
// same kind ends the process at once.
#pragma once

namespace assay {

/// Installs the SIGINT and SIGTERM handlers (idempotent).
void install_stop_handlers();

/// The signal that asked for a stop, or 0.
int stop_signal();

/// Asks for a stop as if `sig` had arrived (tests), or clears it with 0.
void request_stop(int sig);

}  // namespace assay
