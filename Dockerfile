# syntax=docker/dockerfile:1
# gitops-reloader's image. Three stages: compile TypeScript on the full Node 24 image, install only the
# production dependencies, then run on Node 24 slim as uid 65534 with tini as PID 1. Slim rather than
# distroless because git mode runs `git` (and ssh), and tini reaps their orphaned children; the
# argocd-plugin/cmp sidecar runs the same image through /usr/local/bin/gitops-reloader.
# docs/adr/0007-http-and-metrics.md explains these choices.
ARG NODE_IMAGE=node:24-trixie

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY service ./service
COPY git ./git
RUN ./node_modules/.bin/tsc -p tsconfig.build.json

FROM ${NODE_IMAGE} AS deps
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts

FROM ${NODE_IMAGE}-slim
# The commit the image is built from (docker build --build-arg GIT_COMMIT=$(git rev-parse HEAD)):
# `gitops-reloader version`, the gitops_reloader_build_info gauge and these labels report the same.
ARG GIT_COMMIT=unknown
ARG VERSION=0.1.0
LABEL org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${GIT_COMMIT}
# Debian's own versions, kept current by rebuilding the image; npm and corepack are not needed to run.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini git openssh-client ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
      /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack /opt/yarn-* /usr/local/bin/yarn /usr/local/bin/yarnpkg \
 && printf '%s\n' '#!/bin/sh' \
      'exec node --enable-experimental-regexp-engine-on-excessive-backtracks /app/dist/service/cli.js "$@"' \
      > /usr/local/bin/gitops-reloader \
 && chmod 0755 /usr/local/bin/gitops-reloader
WORKDIR /app
# HOME: git writes its config there; the root filesystem is read-only in the chart, /tmp is an emptyDir.
ENV NODE_ENV=production \
    HOME=/tmp
COPY --from=deps /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
RUN printf '{"commit":"%s"}\n' "${GIT_COMMIT}" > dist/build-info.json
USER 65534:65534
EXPOSE 8080
# tini forwards SIGTERM to node (which drains and releases the Lease) and reaps zombies. The V8 flags:
# a pathological user regex (ignore lists, annotations) falls back to a linear-time engine, and the
# young generation is capped with 1 MiB semi-spaces (by default Node 24 let it grow to 64 MiB under
# start-up and churn and kept it: about 70-80 MiB of resident memory; 8 MiB still cost 13 MiB at the
# start-up peak with 20,000 configs, docs/operations.md, bench/README.md "Where the memory goes"). The bench
# starts the service with the same flags (bench/service.ts SERVICE_NODE_FLAGS): keep them in step.
ENTRYPOINT ["/usr/bin/tini", "--", "node", "--enable-experimental-regexp-engine-on-excessive-backtracks", "--max-semi-space-size=1", "dist/service/cli.js"]
CMD ["serve"]
