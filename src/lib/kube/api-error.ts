import {NfdctlError, ExitCode} from '../errors.js'
import {decodeStatus, isProtobufBody} from './protobuf-metadata.js'

/**
 * Kubernetes status classes, decided once here from the HTTP code (and the Status reason where the code
 * is ambiguous) so that nothing else duck-types `code === 410`.
 */
export type StatusClass = 'BadRequest' | 'Conflict' | 'Forbidden' | 'Gone' | 'Invalid' | 'NotFound' | 'Other' | 'TooManyRequests' | 'Unauthorized' | 'Unavailable'

export function classifyStatus(code: number): StatusClass {
  switch (code) {
    case 400:
      return 'BadRequest'
    case 401:
      return 'Unauthorized'
    case 403:
      return 'Forbidden'
    case 404:
      return 'NotFound'
    case 409:
      return 'Conflict'
    case 410:
      return 'Gone'
    case 422:
      return 'Invalid'
    case 429:
      return 'TooManyRequests'
    case 500:
    case 502:
    case 503:
    case 504:
      return 'Unavailable'
    default:
      return 'Other'
  }
}

/** A non-2xx answer from the API server, with the server's own message. */
export class KubeApiError extends NfdctlError {
  readonly statusClass: StatusClass

  constructor(
    readonly method: string,
    readonly path: string,
    readonly code: number,
    readonly serverMessage: string,
    readonly retryAfterSeconds?: number,
    readonly reason?: string,
  ) {
    super(`${method} ${path}: ${[String(code), reason].filter(Boolean).join(' ')}${serverMessage ? `: ${serverMessage}` : ''}`, ExitCode.failed)
    this.statusClass = classifyStatus(code)
  }

  static fromResponse(method: string, path: string, code: number, body: Buffer | string, retryAfter?: string): KubeApiError {
    let message: string
    let reason: string | undefined
    if (Buffer.isBuffer(body) && isProtobufBody(body)) {
      // A Status in protobuf, when the request accepted protobuf first.
      const status = decodeStatus(body)
      message = status.message ?? ''
      reason = status.reason
    } else {
      const text = body.toString()
      message = text.trim().slice(0, 300)
      try {
        const status = JSON.parse(text) as {message?: string; reason?: string}
        message = status.message ?? message
        reason = status.reason
      } catch {
        // Not a Status object (a proxy's HTML page, say): keep the raw text, cut short.
      }
    }
    const seconds = retryAfter === undefined ? undefined : Number.parseInt(retryAfter, 10)
    return new KubeApiError(method, path, code, message, Number.isFinite(seconds) ? seconds : undefined, reason)
  }
}

export function isStatus(err: unknown, statusClass: StatusClass): err is KubeApiError {
  return err instanceof KubeApiError && err.statusClass === statusClass
}
