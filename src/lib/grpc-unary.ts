import type * as grpc from '@grpc/grpc-js'

/**
 * Calls a unary method of a client made by @grpc/grpc-js's loadPackageDefinition and resolves with its
 * answer; a deadline always, metadata when the service needs it (containerd's namespace).
 */
export function unary<Req, Res>(client: grpc.Client, method: string, request: Req, deadlineMs: number, metadata?: grpc.Metadata): Promise<Res> {
  return new Promise((resolve, reject) => {
    const call = (client as unknown as Record<string, (...args: unknown[]) => void>)[method]
    const done = (error: grpc.ServiceError | null, value: Res): void => (error ? reject(error) : resolve(value))
    const options = {deadline: Date.now() + deadlineMs}
    if (metadata === undefined) call.call(client, request, options, done)
    else call.call(client, request, metadata, options, done)
  })
}
