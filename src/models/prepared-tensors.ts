/**
 * Facts both tiers share about a prepared model's tensors: the inference server writes them
 * into the graph it prepares, the API reads the mask by them.
 */

/** Names of the prepared model's tensors: what the inference server's preparation writes. */
export const PREPARED_INPUT = 'image';
export const PREPARED_OUTPUT = 'mask';

/**
 * Below this peak the model found nothing: its output is noise, and stretching it would turn the
 * noise into a foreground. (ISNet peaks at 0.02-0.05 on blank images, near 1 on objects.)
 */
export const MIN_STRETCH_PEAK = 0.25;
