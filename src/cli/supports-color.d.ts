// supports-color 8 (the version oclif resolves, which decides whether its help is bold) ships no types.
declare module 'supports-color' {
  type Support = false | {hasBasic: boolean; has256: boolean; has16m: boolean; level: number}
  const supportsColor: {stdout: Support; stderr: Support}
  export default supportsColor
}
