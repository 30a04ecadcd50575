//! PNG bytes from the RGB buffer plotters draws into (plotters itself only writes PNG files).

/// Encode an 8-bit RGB image as PNG.
pub(crate) fn encode_rgb(width: u32, height: u32, rgb: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, width, height);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let invariant = "invariant: a width × height × 3 RGB buffer encodes to memory";
    let mut w = enc.write_header().expect(invariant);
    w.write_image_data(rgb).expect(invariant);
    w.finish().expect(invariant);
    out
}

/// Decode an 8-bit RGB PNG (for tests).
#[cfg(test)]
pub(crate) fn decode_rgb(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let dec = png::Decoder::new(bytes);
    let mut reader = dec.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("one frame");
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}
