# syntax=docker/dockerfile:1
# Two stages: compile TypeScript with the dev dependencies, then ship only dist/ and the
# production dependencies on a distroless Node 24 base, as non-root (uid 65534).
FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY service ./service
COPY git ./git
RUN npx tsc -p tsconfig.build.json && npm prune --omit=dev

FROM gcr.io/distroless/nodejs24-debian12:nonroot
WORKDIR /app
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
USER 65534:65534
ENTRYPOINT ["/nodejs/bin/node", "dist/service/cli.js"]
CMD ["serve"]
