import {connect} from 'node:net'

/** Whether a TCP connection to host:port is accepted; a refusal is false (answered at once on a local address). */
export function tcpReachable(host: string, port: number, timeoutMs = 5000): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const socket = connect({host, port, timeout: timeoutMs})
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', (error: NodeJS.ErrnoException) => (error.code === 'ECONNREFUSED' ? resolve(false) : reject(error)))
    socket.once('timeout', () => {
      socket.destroy()
      reject(new Error(`connecting to ${host}:${port} timed out after ${timeoutMs} ms`))
    })
  })
}
