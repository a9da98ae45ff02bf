/**
 * The model families bgcut can serve from files users already have (rembg keeps them in
 * `~/.u2net`). Each fact says where it comes from: rembg's session code (what rembg feeds the
 * model and does with its output), the export scripts and the model cards. Facts only: no code
 * was taken from those projects.
 *
 * rembg's sources are cited at github.com/danielgatis/rembg, commit 684f8e9 (rembg/sessions/*.py).
 */

export type FamilyName = 'u2net' | 'isnet' | 'birefnet' | 'bria-rmbg' | 'ben2';

export type ChannelOrder = 'RGB' | 'BGR';

/** How a family's images become its input, and its first output a mask. */
export interface Normalisation {
  /** value = (pixel / 255 - mean) / std, per channel in `channelOrder`. */
  mean: [number, number, number];
  std: [number, number, number];
  /** Order of the input's three channels. Every family here takes RGB (rembg converts to RGB). */
  channelOrder: ChannelOrder;
}

export interface FamilyFacts extends Normalisation {
  family: FamilyName;
  /** Square input size the published exports are fixed to (their graphs pin H and W). */
  size: number;
  /**
   * What the first output holds: `probability` (a sigmoid inside the graph; the mask is its
   * min-max stretch) or `logits` (sigmoid, then the stretch, as rembg does for BiRefNet).
   */
  output: 'probability' | 'logits';
  /**
   * How many outputs the published export has. The mask is always the first (rembg uses
   * `ort_outs[0]`); the others are side outputs that preparation prunes.
   */
  outputs: { min: number; max: number };
  /**
   * The published export's tensor names and opset, as far as they are known. rembg feeds
   * `get_inputs()[0].name` and reads output 0, so names vary between exports: bgcut checks
   * counts, shapes and datatypes and takes the names from the file. The synthetic test graphs
   * use these.
   */
  export: { input: string; outputs: string[]; opset: number; source: string };
  /**
   * The graph's upsampling follows U²-Net's `_upsample_like`, which the free-size pass rewrites
   * (src/inference-server/free-input-size.ts, built on ISNet): preparation tries it, and keeps the
   * published size when the pass refuses the graph.
   */
  freeSize: boolean;
  /** Where each fact above comes from. */
  source: string[];
}

const IMAGENET: Pick<Normalisation, 'mean' | 'std'> = { mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225] };
const HALF: Pick<Normalisation, 'mean' | 'std'> = { mean: [0.5, 0.5, 0.5], std: [1, 1, 1] };

const REMBG = 'https://github.com/danielgatis/rembg/blob/684f8e9/rembg/sessions/';

export const FAMILIES: Record<FamilyName, FamilyFacts> = {
  u2net: {
    family: 'u2net',
    size: 320,
    // rembg's U²-Net exports are older than ISNet's (their upsampling is not known to match the pass).
    freeSize: false,
    ...IMAGENET,
    channelOrder: 'RGB',
    output: 'probability',
    // U2NET.forward returns its fused map and six side maps, each through a sigmoid.
    outputs: { min: 7, max: 7 },
    export: {
      input: 'input.1',
      outputs: ['1959', '1960', '1961', '1962', '1963', '1964', '1965'],
      opset: 11,
      source: 'torch.onnx default names (input.1, numbered outputs); opset assumed, not published',
    },
    source: [
      `${REMBG}u2net.py (320x320, ImageNet mean/std, output 0, min-max stretch, no sigmoid)`,
      'https://github.com/xuebinqin/U-2-Net/blob/master/model/u2net.py (seven outputs, each F.sigmoid)',
    ],
  },
  isnet: {
    family: 'isnet',
    size: 1024,
    freeSize: true,
    ...HALF,
    channelOrder: 'RGB',
    output: 'probability',
    // ISNetDIS returns six sigmoid side maps and six decoder features: 12 outputs in the
    // export bgcut ships (@imgly/background-removal-data); rembg's export may keep fewer.
    outputs: { min: 1, max: 12 },
    export: {
      input: 'input',
      outputs: ['output', '1890', '1891', '1892', '1893', '1894', 'input.1252', 'input.1088', 'input.948', 'input.832', 'input.740', 'input.656'],
      opset: 15,
      source: 'read from @imgly/background-removal-data /models/medium (the ISNet bgcut ships)',
    },
    source: [
      `${REMBG}dis_general_use.py (1024x1024, mean 0.5, std 1, output 0, min-max stretch, no sigmoid)`,
      `${REMBG}dis_anime.py (isnet-anime: mean ImageNet, std 1)`,
      'https://github.com/xuebinqin/DIS/blob/main/IS-Net/models/isnet.py (side outputs through sigmoid)',
    ],
  },
  birefnet: {
    family: 'birefnet',
    size: 1024,
    // Swin windows are reshaped with constant shapes: the export is fixed to 1024.
    freeSize: false,
    ...IMAGENET,
    channelOrder: 'RGB',
    output: 'logits',
    // The export has one output; rembg reads output 0 whatever follows, so a re-export that
    // keeps side predictions after the mask is accepted too.
    outputs: { min: 1, max: 8 },
    export: {
      input: 'input_image',
      outputs: ['output_image'],
      opset: 17,
      source: 'https://github.com/ZhengPeng7/BiRefNet/blob/main/cpp/py/pth2onnx.py (input_image, output_image, opset 17, 1024x1024)',
    },
    source: [
      `${REMBG}birefnet_general.py (1024x1024, ImageNet mean/std, sigmoid of output 0, then min-max stretch); the other birefnet-* sessions subclass it`,
      'https://github.com/ZhengPeng7/BiRefNet/blob/main/cpp/py/pth2onnx.py',
    ],
  },
  'bria-rmbg': {
    family: 'bria-rmbg',
    size: 1024,
    freeSize: false,
    ...IMAGENET,
    channelOrder: 'RGB',
    output: 'probability',
    outputs: { min: 1, max: 8 },
    export: { input: 'pixel_values', outputs: ['alphas'], opset: 17, source: 'names of the Hugging Face export (briaai/RMBG-2.0 onnx/); opset assumed' },
    source: [`${REMBG}bria_rmbg.py (1024x1024, ImageNet mean/std, output 0, min-max stretch, no sigmoid)`, 'https://huggingface.co/briaai/RMBG-2.0'],
  },
  ben2: {
    family: 'ben2',
    size: 1024,
    freeSize: false,
    ...HALF,
    channelOrder: 'RGB',
    output: 'probability',
    outputs: { min: 1, max: 8 },
    export: { input: 'input', outputs: ['output'], opset: 17, source: 'assumed: the names of BEN2_Base.onnx are not published' },
    source: [`${REMBG}ben_custom.py (1024x1024, mean 0.5, std 1, output 0, min-max stretch, no sigmoid)`, 'https://huggingface.co/PramaLLC/BEN2'],
  },
};

export function isFamilyName(name: string): name is FamilyName {
  return Object.hasOwn(FAMILIES, name);
}
