declare module 'color-name' {
  /** CSS colour names to [r, g, b]. */
  const colors: Record<string, [number, number, number]>;
  export default colors;
}
