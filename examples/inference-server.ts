/**
 * The inference server on its own, as on a dedicated host:
 *   node dist/examples/inference-server.js   (same flags and environment as bgcut-inference-server)
 * It is the package's bin; this file only shows that starting one takes one import.
 */
import '../src/inference-server/cli.js';
