// The workbench's Chinese (zh-CN) words, by their English sentence.
export const ZH = {};
