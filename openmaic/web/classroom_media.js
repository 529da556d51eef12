// A scene's media on the classroom page: its pictures and videos (with their posters), and its narration clip,
// served from the owner's asset store (`GET /api/assets/{id}`). An element that failed, whose slot is off, or
// that is still being made keeps a placeholder that says so.
//
// The classroom page (classroom.js) asks this module for two things per scene and places what it gets:
// `sceneMedia(scene)` under the scene's content, `narration(scene, title)` at the head of the scene's script.
// Both answer null when the scene has nothing of the kind. The scene is the classroom's wire form
// (`GET /api/classrooms/{id}`): `media: [{elementId, kind, prompt, status, assetId?, posterAssetId?}]` and
// `narrationAssetId`.

import { h } from "./api.js";

const asset = (id) => `/api/assets/${encodeURIComponent(id)}`;

const PLACEHOLDER = {
  pending: "Being generated…",
  generating: "Being generated…",
  failed: "Could not be generated",
  disabled: "Not generated: this server has no provider for it",
};

function mediaFigure(m) {
  const kind = m.kind || m.mediaType || "image";
  const status = m.status || "pending";
  const prompt = m.prompt || "";
  const what = kind === "video" ? "Video" : "Picture";
  const dataset = m.elementId ? { elementId: m.elementId, status, kind } : { status, kind };
  const figure = h("figure", { class: "media-element", dataset });
  if (status === "done" && m.assetId) {
    if (kind === "video" && m.posterAssetId && m.posterAssetId === m.assetId) {
      // No video encoder made this clip: its poster frame stands in for it.
      figure.append(h("img", { src: asset(m.posterAssetId), alt: prompt, loading: "lazy" }),
        h("figcaption", {}, `${prompt} (poster frame)`));
    } else if (kind === "video") {
      figure.append(h("video", {
        src: asset(m.assetId), poster: m.posterAssetId ? asset(m.posterAssetId) : undefined, controls: true,
        preload: "metadata", "aria-label": prompt,
      }), h("figcaption", {}, prompt));
    } else {
      figure.append(h("img", { src: asset(m.assetId), alt: prompt }), h("figcaption", {}, prompt));
    }
  } else {
    const text = `${what}: ${PLACEHOLDER[status] || status}`;
    figure.append(h("div", { class: "placeholder", role: "img", "aria-label": text, dataset: { status } },
      h("span", {}, text)), h("figcaption", {}, prompt));
  }
  return figure;
}

/** The scene's pictures and videos, or null. */
export function sceneMedia(scene) {
  const media = scene.media || [];
  if (!media.length) return null;
  return h("div", { class: "media" }, media.map(mediaFigure));
}

/** The scene's narration clip, or null. */
export function narration(scene, title) {
  if (!scene.narrationAssetId) return null;
  return h("div", { class: "narration" },
    h("audio", { src: asset(scene.narrationAssetId), controls: true, preload: "metadata",
      "aria-label": `Narration of ${title}` }));
}
