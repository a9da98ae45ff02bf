import { FAMILIES, type FamilyName, type Normalisation } from './families.js';

/** A model's licence as `GET /v1/models` and the server's start-up log state it. */
export interface Licence {
  /** SPDX identifier. */
  spdx: string;
  /** False for a licence that forbids commercial use. */
  commercialUse: boolean;
  /** Where the licence is stated. */
  url: string;
}

export const LICENCES = {
  u2net: { spdx: 'Apache-2.0', commercialUse: true, url: 'https://github.com/xuebinqin/U-2-Net/blob/master/LICENSE' },
  isnet: { spdx: 'Apache-2.0', commercialUse: true, url: 'https://github.com/xuebinqin/DIS/blob/main/LICENSE.md' },
  animeSegmentation: { spdx: 'Apache-2.0', commercialUse: true, url: 'https://github.com/SkyTNT/anime-segmentation/blob/main/LICENSE' },
  birefnet: { spdx: 'MIT', commercialUse: true, url: 'https://github.com/ZhengPeng7/BiRefNet/blob/main/LICENSE' },
  briaRmbg2: { spdx: 'CC-BY-NC-4.0', commercialUse: false, url: 'https://huggingface.co/briaai/RMBG-2.0' },
  ben2: { spdx: 'MIT', commercialUse: true, url: 'https://huggingface.co/PramaLLC/BEN2' },
} as const satisfies Record<string, Licence>;

/** A model rembg users have, by rembg's name for it. */
export interface KnownModel {
  /** rembg's name (`rembg i -m NAME`), also the name bgcut serves it under by default. */
  name: string;
  family: FamilyName;
  /**
   * File names looked for in the model folder, in order: rembg's own (`NAME.onnx`, how it saves
   * a download), then the name the file is published under.
   */
  fileNames: string[];
  /** Where rembg users get the file (rembg downloads from here; bgcut never does). */
  download: string;
  /** MD5 rembg checks a download against, when it checks one. */
  rembgMd5?: string;
  licence: Licence;
  /** Differences from the family's normalisation (isnet-anime's mean). */
  normalisation?: Partial<Normalisation>;
  /** Where the facts come from, beyond the family's. */
  source: string[];
}

const RELEASE = 'https://github.com/danielgatis/rembg/releases/download/v0.0.0/';
const REMBG = 'https://github.com/danielgatis/rembg/blob/684f8e9/rembg/sessions/';

function rembgModel(name: string, family: FamilyName, release: string, md5: string | undefined, licence: Licence, session: string, extra: Partial<KnownModel> = {}): KnownModel {
  const fileNames = [`${name}.onnx`, ...(release === `${name}.onnx` ? [] : [release])];
  return { name, family, fileNames, download: RELEASE + release, licence, source: [`${REMBG}${session}`], ...(md5 ? { rembgMd5: md5 } : {}), ...extra };
}

/** Every model `--model NAME` finds by rembg's name. */
export const KNOWN_MODELS: Record<string, KnownModel> = Object.fromEntries(
  ([
    rembgModel('u2net', 'u2net', 'u2net.onnx', '60024c5c889badc19c04ad937298a77b', LICENCES.u2net, 'u2net.py'),
    rembgModel('u2netp', 'u2net', 'u2netp.onnx', '8e83ca70e441ab06c318d82300c84806', LICENCES.u2net, 'u2netp.py'),
    rembgModel('u2net_human_seg', 'u2net', 'u2net_human_seg.onnx', 'c09ddc2e0104f800e3e1bb4652583d1f', LICENCES.u2net, 'u2net_human_seg.py'),
    rembgModel('silueta', 'u2net', 'silueta.onnx', '55e59e0d8062d2f5d013f4725ee84782', LICENCES.u2net, 'silueta.py'),
    rembgModel('isnet-general-use', 'isnet', 'isnet-general-use.onnx', 'fc16ebd8b0c10d971d3513d564d01e29', LICENCES.isnet, 'dis_general_use.py'),
    rembgModel('isnet-anime', 'isnet', 'isnet-anime.onnx', '6f184e756bb3bd901c8849220a83e38e', LICENCES.animeSegmentation, 'dis_anime.py', {
      // rembg feeds isnet-anime ImageNet's mean with std 1 (dis_anime.py), unlike isnet-general-use.
      normalisation: { mean: [0.485, 0.456, 0.406], std: [1, 1, 1] },
    }),
    rembgModel('birefnet-general', 'birefnet', 'BiRefNet-general-epoch_244.onnx', '7a35a0141cbbc80de11d9c9a28f52697', LICENCES.birefnet, 'birefnet_general.py'),
    rembgModel('birefnet-general-lite', 'birefnet', 'BiRefNet-general-bb_swin_v1_tiny-epoch_232.onnx', '4fab47adc4ff364be1713e97b7e66334', LICENCES.birefnet, 'birefnet_general_lite.py'),
    rembgModel('birefnet-portrait', 'birefnet', 'BiRefNet-portrait-epoch_150.onnx', 'c3a64a6abf20250d090cd055f12a3b67', LICENCES.birefnet, 'birefnet_portrait.py'),
    rembgModel('birefnet-massive', 'birefnet', 'BiRefNet-massive-TR_DIS5K_TR_TEs-epoch_420.onnx', '33e726a2136a3d59eb0fdf613e31e3e9', LICENCES.birefnet, 'birefnet_massive.py'),
    rembgModel('birefnet-hrsod', 'birefnet', 'BiRefNet-HRSOD_DHU-epoch_115.onnx', 'c017ade5de8a50ff0fd74d790d268dda', LICENCES.birefnet, 'birefnet_hrsod.py'),
    rembgModel('birefnet-dis', 'birefnet', 'BiRefNet-DIS-epoch_590.onnx', '2d4d44102b446f33a4ebb2e56c051f2b', LICENCES.birefnet, 'birefnet_dis.py'),
    rembgModel('birefnet-cod', 'birefnet', 'BiRefNet-COD-epoch_125.onnx', 'f6d0d21ca89d287f17e7afe9f5fd3b45', LICENCES.birefnet, 'birefnet_cod.py'),
    // rembg checks this one by SHA-256 (5b486f08...), not MD5.
    rembgModel('bria-rmbg', 'bria-rmbg', 'bria-rmbg-2.0.onnx', undefined, LICENCES.briaRmbg2, 'bria_rmbg.py'),
    {
      // rembg has no download for BEN2: `-m ben_custom -x '{"model_path": "~/.u2net/BEN2_Base.onnx"}'`.
      name: 'ben2',
      family: 'ben2',
      fileNames: ['ben2.onnx', 'BEN2_Base.onnx'],
      download: 'https://huggingface.co/PramaLLC/BEN2 (BEN2_Base.onnx)',
      licence: LICENCES.ben2,
      source: [`${REMBG}ben_custom.py`],
    },
  ] satisfies KnownModel[]).map((model) => [model.name, model]),
);

export function isKnownModel(name: string): boolean {
  return Object.hasOwn(KNOWN_MODELS, name);
}

/** The normalisation a known model's input gets: its family's, with its own differences. */
export function normalisationOf(model: KnownModel): Normalisation {
  const family = FAMILIES[model.family];
  return { mean: family.mean, std: family.std, channelOrder: family.channelOrder, ...model.normalisation };
}
