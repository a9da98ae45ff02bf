import { DATATYPE_BYTES, elementCount, isDatatype, typedContentsToBytes, typedValueCount, type Datatype, type ModelInferResponse__Output } from '../../protocol/index.js';
import type { MaskTensor } from '../image/tensor.js';

/**
 * The named output of a ModelInfer answer as a typed array, from `raw_output_contents` or the
 * tensor's typed `contents`, after checking its datatype and that its bytes fill its shape.
 */
export function readOutput(response: ModelInferResponse__Output, name: string, datatype: Datatype) {
  const index = response.outputs.findIndex((o) => o.name === name);
  const tensor = response.outputs[index];
  if (!tensor) throw new Error(`no output ${name} in the answer`);
  if (tensor.datatype !== datatype || !isDatatype(datatype)) throw new Error(`output ${name} is ${tensor.datatype}, expected ${datatype}`);
  if (datatype !== 'FP32' && datatype !== 'UINT8' && datatype !== 'UINT16') throw new Error(`masks of type ${datatype} are not supported`);
  const shape = tensor.shape.map(Number);
  const elements = elementCount(shape);
  const raw = response.rawOutputContents.length > 0 ? response.rawOutputContents[index] : undefined;
  if (raw && typedValueCount(tensor.contents) > 0) throw new Error(`output ${name} has both raw and typed contents`);
  const bytes = raw ?? typedContentsToBytes(datatype, tensor.contents ?? ({} as never), elements);
  if (bytes.length !== elements * DATATYPE_BYTES[datatype]) throw new Error(`output ${name} has ${bytes.length} bytes for shape [${shape}]`);
  const runUs = response.parameters.session_run_us?.int64Param;
  const serverRunMs = runUs === undefined ? undefined : Number(runUs) / 1000;
  return { shape, data: typedView(datatype, bytes), serverRunMs, bytesReceived: bytes.length };
}

/** A typed view of received bytes; copied only when they do not start on the element's alignment. */
export function typedView(datatype: 'FP32' | 'UINT8' | 'UINT16', bytes: Uint8Array): MaskTensor {
  const size = DATATYPE_BYTES[datatype];
  const aligned = bytes.byteOffset % size === 0 ? bytes : Uint8Array.from(bytes);
  const { buffer, byteOffset, byteLength } = aligned;
  if (datatype === 'UINT8') return new Uint8Array(buffer, byteOffset, byteLength);
  if (datatype === 'UINT16') return new Uint16Array(buffer, byteOffset, byteLength / 2);
  return new Float32Array(buffer, byteOffset, byteLength / 4);
}
