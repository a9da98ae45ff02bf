import { describe, expect, it } from 'vitest';
import { ISNET_FP32_PROFILE, ISNET_PROFILE, type PreprocessingProfile } from '../src/core/image/profile.js';
import { imageToTensor, maskToGrey } from '../src/core/image/tensor.js';

const tiny = (profile: PreprocessingProfile): PreprocessingProfile => ({ ...profile, width: 2, height: 1 });
const rgb = Buffer.from([0, 51, 255, 255, 102, 0]); // two pixels, interleaved

describe('model input tensors', () => {
  it('UINT8 NHWC (the prepared model) is the decoded bytes themselves: no copy, no per-pixel work', () => {
    const tensor = imageToTensor(rgb, tiny(ISNET_PROFILE));
    expect(tensor).toBeInstanceOf(Uint8Array);
    expect(tensor.buffer).toBe(rgb.buffer);
    expect([...tensor]).toEqual([...rgb]);
  });

  it('FP32 NCHW is planar and normalised as px/255 - mean', () => {
    const tensor = imageToTensor(rgb, tiny(ISNET_FP32_PROFILE));
    expect(tensor).toBeInstanceOf(Float32Array);
    expect([...tensor].map((v) => Math.round(v * 1000) / 1000)).toEqual([-0.5, 0.5, -0.3, -0.1, 0.5, -0.5]);
  });

  it('UINT8 NCHW and FP32 NHWC follow the layout', () => {
    expect([...imageToTensor(rgb, { ...tiny(ISNET_PROFILE), inputLayout: 'NCHW' })]).toEqual([0, 255, 51, 102, 255, 0]);
    const nhwc = imageToTensor(rgb, { ...tiny(ISNET_FP32_PROFILE), inputLayout: 'NHWC' });
    expect([...nhwc].map((v) => Math.round(v * 1000) / 1000)).toEqual([-0.5, -0.3, 0.5, 0.5, -0.1, -0.5]);
  });
});

describe('masks to 8-bit grey', () => {
  it('an 8-bit mask that needs no stretch is used as it is', () => {
    const mask = new Uint8Array([0, 128, 255]);
    const grey = maskToGrey(mask, false);
    expect(grey.buffer).toBe(mask.buffer);
  });

  it('16-bit and FP32 masks stretch alike', () => {
    expect([...maskToGrey(new Uint16Array([6553, 32768, 52428]), true)]).toEqual([...maskToGrey(new Float32Array([0.1, 0.5, 0.8]), true)]);
    expect([...maskToGrey(new Uint16Array([6553, 32768, 52428]), true)]).toEqual([0, 146, 255]);
  });

  it('keeps the "no foreground" rule for 16-bit masks: a map peaking below 0.25 is not stretched', () => {
    expect([...maskToGrey(new Uint16Array([0, 3277, 13107]), true)]).toEqual([0, 13, 51]);
  });
});
