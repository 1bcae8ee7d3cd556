# The nfdctl image used by deploy/. (No Docker engine runs on the development machines; built in release CI.)
FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm pack && mkdir /out && mv nfdctl-*.tgz /out/

FROM node:20-bookworm-slim
COPY --from=build /out /out
RUN npm install --global --omit=dev /out/nfdctl-*.tgz && rm -rf /out /root/.npm
USER 65532:65532
ENTRYPOINT ["nfdctl"]
