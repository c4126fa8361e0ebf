// Tensors as the API sends and takes them: nested arrays, or base64 objects of float32 or int32
// bytes, read into flat typed arrays.

function b64ToBytes(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function bytesToB64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

export function f32Tensor(flat, shape) {
  return { dtype: 'float32', shape, data: bytesToB64(new Uint8Array(flat.buffer, flat.byteOffset, flat.byteLength)) };
}

// A response tensor (nested arrays or a base64 object) as {shape, data} with flat typed data.
export function readTensor(t) {
  if (Array.isArray(t)) {
    const shape = [];
    for (let x = t; Array.isArray(x); x = x[0]) shape.push(x.length);
    return { shape, data: Float32Array.from(t.flat(Infinity)) };
  }
  const bytes = b64ToBytes(t.data);
  const Ctor = t.dtype === 'int32' ? Int32Array : Float32Array;
  return { shape: t.shape, data: new Ctor(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4) };
}
